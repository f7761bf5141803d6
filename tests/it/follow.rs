//! Following a run without an event log (`host.follow: poll`), status from
//! predicates over the run document (`host.statusRules`), and a created run named only by a
//! header of a `202 Accepted` (`host.created`), against the devhost's Azure-style and
//! AIP-151 flavours (devhost/src/azure.rs, devhost/src/aip151.rs), which have no event log.

use std::time::Duration;

use openwop_devhost::Flavor;
use openwop_mcp_sidecar::host::RunStatus;
use serde_json::{json, Value};

use crate::support::*;
use crate::templates::{caller, client, operations, recorded};

/// The Azure-style mapping: `POST /jobs` answers `202` with an empty body, the job in
/// `Location` and its status monitor in `Operation-Location`; `Operation-Id` dedupes a
/// repeated create; an approval is `pendingApproval` (an input request `pendingInput`) while
/// the status says `Running`, answered at `/jobs/{name}/approve` and `/jobs/{name}/input`
/// (tests/it/resolve.rs).
pub(crate) const AZURE: &str = "host:
  follow: poll
  created: { idFrom: header, header: Location, idPattern: '/jobs/{id}', monitor: Operation-Location }
  idempotency: { header: Operation-Id }
  fields: { runId: /name, workflowId: /jobType, variables: /result, error: /error, errorCode: /error/code, errorMessage: /error/message }
  statuses: { NotStarted: pending, Running: running, Canceling: cancelling, Succeeded: completed, Failed: failed, Canceled: cancelled }
  statusRules:
    - { when: { present: /pendingApproval }, status: waiting-approval }
    - { when: { present: /properties/pendingApproval }, status: waiting-approval }
    - { when: { present: /pendingInput }, status: waiting-input }
    - { when: { present: /properties/pendingInput }, status: waiting-input }
  interrupts:
    waiting-approval: { id: /pendingApproval/id, node: /pendingApproval/step, message: /pendingApproval/title }
    waiting-input: { id: /pendingInput/id, node: /pendingInput/step, message: /pendingInput/prompt, schema: /pendingInput/answerSchema }
  resolve:
    waiting-approval:
      accept: { path: '/jobs/{runId}/approve?api-version=2026-01-01', body: { approvalId: '{interruptId}', decision: Approve, comment: '{content.feedback}' } }
      reject: { path: '/jobs/{runId}/approve?api-version=2026-01-01', body: { approvalId: '{interruptId}', decision: Reject, comment: '{content.feedback}' } }
    waiting-input:
      accept: { path: '/jobs/{runId}/input?api-version=2026-01-01', body: { inputRequestId: '{interruptId}', answers: '{content}' } }
      decline: { path: '/jobs/{runId}/input?api-version=2026-01-01', body: { inputRequestId: '{interruptId}', decline: true } }
  routes:
    listRuns: { path: '/jobTypes?api-version=2026-01-01' }
    createRun: { path: '/jobs?api-version=2026-01-01' }
    getRun: { path: '/jobs/{runId}?api-version=2026-01-01' }
    cancelRun: { path: '/jobs/{runId}/cancel?api-version=2026-01-01' }
  bodies:
    createRun: { jobType: '{tool}', parameters: '{arguments}' }
tools:
  source: static
  static:
    - { name: greeting, workflowId: structured-greeting }
    - { name: approval, workflowId: conformance-approval }
    - { name: clarification, workflowId: conformance-clarification }
";

/// [`AZURE`] with taskIds that carry the job name (`job-<12 hex>` is no OpenWOP id), for
/// tasks/get and listens.
fn azure_tasks() -> String {
    AZURE.replacen("host:\n", "host:\n  ids: { taskId: opaque }\n", 1)
}

/// The AIP-151 mapping: the operation is the run; `done` with `error` or `response` says how
/// it ended, and the terminal `metadata.state` names are deliberately left unmapped, so only
/// the predicates can say it. listRuns points at the devhost's fault switches because the
/// static catalog's credential probe sends `limit=1`, which this strict host refuses. A
/// waiting operation is answered through its custom methods (`:approve`, `:reject`,
/// `:provideInput`; tests/it/resolve.rs); a rejected approval ends with `error.code` 10
/// (ABORTED), which reads `failed`, as OpenWOP's `approval_rejected` does.
pub(crate) const AIP151: &str = "host:
  ids: { path: raw }
  follow: { mode: poll, initialIntervalMs: 50, maxIntervalMs: 400 }
  idempotency: { bodyField: /requestId }
  fields: { createdRunId: /name, createdStatus: /metadata/state, runId: /name, workflowId: /metadata/jobType, status: /metadata/state, variables: /response/result, error: /error }
  statuses: { PENDING: pending, RUNNING: running, AWAITING_APPROVAL: waiting-approval, AWAITING_INPUT: waiting-input, CANCELLING: cancelling }
  statusRules:
    - { when: { field: /error/code, equals: 1 }, status: cancelled }
    - { when: { present: /error, field: /done, equals: true }, status: failed }
    - { when: { present: /response, field: /done, equals: true }, status: completed }
  interrupts:
    waiting-approval: { id: /metadata/approval/id, node: /metadata/approval/step, message: /metadata/approval/message }
    waiting-input: { id: /metadata/inputRequest/id, node: /metadata/inputRequest/step, message: /metadata/inputRequest/message, schema: /metadata/inputRequest/schema }
  resolve:
    waiting-approval:
      accept: { path: '/v1/{runId}:approve', body: { approvalId: '{interruptId}', comment: '{content.feedback}' } }
      reject: { path: '/v1/{runId}:reject', body: { approvalId: '{interruptId}', reason: '{content.feedback}' } }
    waiting-input:
      accept: { path: '/v1/{runId}:provideInput', body: { inputRequestId: '{interruptId}', values: '{content}' } }
      decline: { path: '/v1/{runId}:provideInput', body: { inputRequestId: '{interruptId}', decline: true } }
  routes:
    listRuns: { path: /_devhost/faults }
    createRun: { path: '/v1/projects/acme/jobTypes/{tool}:run' }
    getRun: { path: '/v1/{runId}' }
    cancelRun: { path: '/v1/{runId}:cancel' }
  bodies:
    createRun: { parameters: '{arguments}' }
    cancelRun: {}
tools:
  source: static
  static:
    - { name: noop, workflowId: conformance-noop }
    - { name: failure, workflowId: conformance-failure }
    - { name: cancellable, workflowId: conformance-cancellable }
    - { name: approval, workflowId: conformance-approval }
    - { name: clarification, workflowId: conformance-clarification }
mcp: { taskImmediateWindowMs: 0 }
";

fn text_of(r: &Rpc) -> String {
    r.result()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_blocking_call_follows_a_202_job_by_its_status_monitor_never_sooner_than_retry_after() {
    let env = env_with_yaml(Flavor::Azure, AZURE, |_| {}).await;
    env.host.clear_status_monitor_reads();
    let started = std::time::Instant::now();
    let r = env
        .call(
            A,
            "greeting",
            json!({"name": "Ada", "delayMs": 3000}),
            json!({}),
        )
        .await;
    let took = started.elapsed();
    assert!(text_of(&r).contains("Hello, Ada!"), "{}", r.text);
    assert!(took >= Duration::from_secs(3), "{took:?}");

    // The 202 carried no body: the job came from `Location`, and the create was not taken
    // for a lost answer (no replay, one job).
    let posts = recorded(&env.host, "POST", "/jobs");
    assert_eq!(posts.len(), 1, "createRun sent once");
    let reads = env.host.status_monitor_reads();
    assert_eq!(reads.len(), 1, "one job: {reads:?}");
    let job = &reads[0];
    // Retry-After is 1 s: a 3 s job is read about three times, none sooner than asked.
    assert_eq!(job.early_reads(), 0, "{job:?}");
    assert!(
        (2..=5).contains(&job.reads.len()),
        "{} reads of a 3 s job: {job:?}",
        job.reads.len()
    );
    assert_eq!(job.reads.last().unwrap().status, "Succeeded");
    // The monitor URL is read verbatim: its one api-version, nothing appended.
    let monitor = recorded(
        &env.host,
        "GET",
        &format!("/operations/{}", job.operation_id),
    );
    assert!(monitor
        .iter()
        .all(|q| q.query.as_deref() == Some("api-version=2026-01-01")));
    // No event log was asked for.
    assert_no_event_log_read(&env);
    env.shutdown().await;
}

#[tokio::test]
async fn a_tasked_call_takes_its_poll_interval_from_retry_after() {
    let env = env_with_yaml(Flavor::Azure, AZURE, |_| {}).await;
    let r = env
        .call(
            A,
            "greeting",
            json!({"name": "Bo", "delayMs": 20000}),
            task_caps(),
        )
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    assert_eq!(r.result()["pollIntervalMs"], 1000, "{}", r.text);
    assert_eq!(r.result()["status"], "working", "{}", r.text);
    assert_eq!(recorded(&env.host, "POST", "/jobs").len(), 1);
    let reads = env.host.status_monitor_reads();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].early_reads(), 0, "{:?}", reads[0]);
    let job = r.result()["taskId"].as_str().unwrap().to_string();
    let _ = env
        .http
        .post(format!(
            "{}/jobs/{job}/cancel?api-version=2026-01-01",
            env.host.base_url()
        ))
        .bearer_auth(A)
        .json(&json!({}))
        .send()
        .await;
    env.shutdown().await;
}

#[tokio::test]
async fn a_pending_approval_while_running_reads_as_waiting_approval() {
    let host = devhost_of(Flavor::Azure).await;
    let c = client(AZURE, &host);
    let who = caller(A);
    let create = c
        .prepare_create(
            &who,
            None,
            "conformance-approval",
            &json!({}),
            &[],
            "3f2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c",
        )
        .unwrap();
    let created = c.create_run(&who, &create).await.expect("202 is an answer");
    assert!(created.run_id.starts_with("job-"), "{created:?}");
    assert_eq!(created.retry_after, Some(Duration::from_secs(1)));
    let monitor = created.monitor.clone().expect("Operation-Location");
    assert!(monitor.starts_with(&host.base_url()));
    let mut status = RunStatus::Pending;
    for _ in 0..50 {
        status = c.get_run(&who, &created.run_id).await.unwrap().status;
        if status != RunStatus::Pending && status != RunStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, RunStatus::WaitingApproval, "the job says Running");
    let read = c
        .read_status(&who, &created.run_id, Some(&monitor))
        .await
        .unwrap();
    assert_eq!(read.status, RunStatus::WaitingApproval, "the monitor too");
    assert_eq!(read.retry_after, Some(Duration::from_secs(1)));
    host.shutdown().await;
}

#[tokio::test]
async fn a_status_monitor_on_another_origin_is_never_read() {
    let host = devhost_of(Flavor::Azure).await;
    let c = client(AZURE, &host);
    let who = caller(A);
    let e = c
        .read_status(&who, "job-nothere", Some("http://127.0.0.2:9/operations/x"))
        .await
        .unwrap_err();
    // getRun of the (missing) job was read instead; nothing went to the other origin.
    assert_eq!(e.status().map(|s| s.as_u16()), Some(404), "{e:?}");
    assert_eq!(recorded(&host, "GET", "/jobs/job-nothere").len(), 1);
    host.shutdown().await;
}

async fn task_status(env: &Env, task_id: &str) -> Value {
    let r = env
        .rpc(
            Some(A),
            "tasks/get",
            json!({ "taskId": task_id }),
            task_caps(),
        )
        .await;
    assert!(r.body.get("result").is_some(), "{}", r.text);
    r.result().clone()
}

async fn settled_task(env: &Env, task_id: &str) -> Value {
    let mut t = Value::Null;
    for _ in 0..60 {
        t = task_status(env, task_id).await;
        if t["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t
}

#[tokio::test]
async fn aip151_done_with_response_error_or_cancel_code_are_completed_failed_cancelled() {
    let env = env_with_yaml(Flavor::Aip151, AIP151, |_| {}).await;
    // Blocking calls: followed by reading the operation, no event log.
    let r = env.call(A, "noop", json!({}), json!({})).await;
    assert!(r.body.get("result").is_some(), "{}", r.text);
    assert_ne!(r.result()["isError"], true, "{}", r.text);
    let r = env.call(A, "failure", json!({}), json!({})).await;
    assert!(
        r.result()["isError"] == true || r.error_code().is_some(),
        "a failed run: {}",
        r.text
    );

    // Tasks: the operation name `operations/op-…` is the taskId's run id.
    let done = tasked(&env, A, "cancellable", json!({"delayMs": 300})).await;
    let t = settled_task(&env, &done).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert!(t.to_string().contains(r#"\"status\":\"completed\""#), "{t}");
    // ext-tasks: a failed run is a completed task whose result is an error.
    let failed = tasked(&env, A, "failure", json!({})).await;
    let t = settled_task(&env, &failed).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert!(t.to_string().contains(r#"\"status\":\"failed\""#), "{t}");
    let long = tasked(&env, A, "cancellable", json!({"delayMs": 30000})).await;
    assert_eq!(task_status(&env, &long).await["status"], "working");
    let r = env
        .rpc(
            Some(A),
            "tasks/cancel",
            json!({ "taskId": long }),
            task_caps(),
        )
        .await;
    assert!(r.body.get("result").is_some(), "{}", r.text);
    assert_eq!(settled_task(&env, &long).await["status"], "cancelled");
    let ops = operations(&env.host).await;
    assert!(ops.iter().any(|o| o["error"]["code"] == 1), "{ops:?}");
    assert_no_event_log_read(&env);
    env.shutdown().await;
}

#[tokio::test]
async fn aip151_a_waiting_operation_is_an_input_required_task_with_its_request_from_the_document() {
    let env = env_with_yaml(Flavor::Aip151, AIP151, |_| {}).await;
    // An approval: `metadata.approval` while `metadata.state` is AWAITING_APPROVAL.
    let id = tasked(&env, A, "approval", json!({})).await;
    let t = settled_task(&env, &id).await;
    assert_eq!(t["status"], "input_required", "{t}");
    let requests = t["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{t}");
    let r = requests.values().next().unwrap();
    assert_eq!(r["method"], "elicitation/create", "{t}");
    assert!(
        r["params"]["requestedSchema"]["properties"]["action"]["enum"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("accept"))),
        "an approval asks accept or reject: {t}"
    );
    cancel(&env, &id).await;

    // An input request: `metadata.inputRequest` with its message and schema.
    let id = tasked(&env, A, "clarification", json!({})).await;
    let t = settled_task(&env, &id).await;
    assert_eq!(t["status"], "input_required", "{t}");
    let ops = operations(&env.host).await;
    let op = ops
        .iter()
        .find(|o| o["metadata"]["inputRequest"].is_object())
        .expect("an operation awaiting input");
    let asked = &op["metadata"]["inputRequest"];
    let r = &t["inputRequests"][asked["id"].as_str().unwrap()];
    assert_eq!(r["params"]["message"], asked["message"], "{t}");
    assert_eq!(
        r["params"]["requestedSchema"]["properties"], asked["schema"]["properties"],
        "{t}"
    );
    cancel(&env, &id).await;
    env.shutdown().await;
}

async fn cancel(env: &Env, task_id: &str) {
    let r = env
        .rpc(
            Some(A),
            "tasks/cancel",
            json!({ "taskId": task_id }),
            task_caps(),
        )
        .await;
    assert!(r.body.get("result").is_some(), "{}", r.text);
}

#[tokio::test]
async fn a_client_gone_before_the_answer_cancels_a_polled_job() {
    // Ownership is the same under `follow: poll`: a disconnect before the answer is sent
    // cancels the run (RFC 0198 §G.12).
    let env = env_with_yaml(Flavor::Azure, AZURE, |_| {}).await;
    let body = body_of(
        1,
        "tools/call",
        json!({"name": "greeting", "arguments": {"name": "Cy", "delayMs": 30000}}),
        json!({}),
    );
    let s = raw_post(&env, &body, "application/json", A).await;
    let mut job = None;
    for _ in 0..50 {
        if let Some(r) = env.host.status_monitor_reads().first() {
            job = Some(r.job.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let job = job.expect("the job was created");
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(s);
    let mut status = String::new();
    for _ in 0..50 {
        let r: Value = env
            .http
            .get(format!(
                "{}/jobs/{job}?api-version=2026-01-01",
                env.host.base_url()
            ))
            .bearer_auth(A)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        status = r["status"].as_str().unwrap_or_default().to_string();
        if status == "Canceled" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, "Canceled");
    assert_eq!(
        recorded(&env.host, "POST", &format!("/jobs/{job}/cancel")).len(),
        1
    );
    env.shutdown().await;
}

/// The flavours that are not OpenWOP have no event log: following a run never asks for one.
fn assert_no_event_log_read(env: &Env) {
    assert!(env
        .host
        .requests()
        .iter()
        .all(|q| !q.path.contains("/events")));
}

/// The `notifications/tasks` of a listen, in order.
fn task_notes(msgs: &[Value]) -> Vec<&Value> {
    msgs.iter()
        .filter(|m| m["method"] == "notifications/tasks")
        .collect()
}

/// A listen ends as it does for an OpenWOP host: its result once every task is terminal.
fn assert_ended_with_its_result(msgs: &[Value]) {
    let last = msgs.last().expect("messages");
    assert_eq!(
        last["result"]["resultType"], "complete",
        "ends with the listen's result: {msgs:#?}"
    );
    assert!(!msgs
        .iter()
        .any(|m| m["method"] == "notifications/cancelled"));
}

#[tokio::test]
async fn a_listen_follows_a_polled_job_by_reading_it_never_sooner_than_retry_after() {
    let env = env_with_yaml(Flavor::Azure, &azure_tasks(), |_| {}).await;
    let r = env
        .call(
            A,
            "greeting",
            json!({"name": "Di", "delayMs": 3000}),
            task_caps(),
        )
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    // The listen's own reads: what the tasked call read before is not counted.
    env.host.clear_status_monitor_reads();
    let msgs = env
        .listen(A, vec![task.clone()], Duration::from_secs(10))
        .await;
    assert_eq!(
        msgs[0]["method"],
        "notifications/subscriptions/acknowledged"
    );
    assert_eq!(msgs[0]["params"]["notifications"]["taskIds"], json!([task]));
    let notes = task_notes(&msgs);
    assert_eq!(notes[0]["params"]["status"], "working", "{msgs:#?}");
    // The job's Retry-After is the task's pollIntervalMs, as tasks/get says.
    assert_eq!(notes[0]["params"]["pollIntervalMs"], 1000, "{msgs:#?}");
    let done = notes.last().unwrap();
    assert_eq!(done["params"]["status"], "completed", "{msgs:#?}");
    assert!(done.to_string().contains("Hello, Di!"), "{done}");
    assert_ended_with_its_result(&msgs);

    // The job was read (getRun: the taskId names no status monitor), never sooner than
    // its last answer's Retry-After asked: about once a second for 3 s, not in a loop.
    let reads = env.host.status_monitor_reads();
    let job = &reads[0];
    assert_eq!(job.early_resource_reads(), 0, "{job:?}");
    assert!(
        (2..=6).contains(&job.resource_reads.len()),
        "{} reads of a 3 s job: {job:?}",
        job.resource_reads.len()
    );
    assert_eq!(job.resource_reads.last().unwrap().status, "Succeeded");
    assert_no_event_log_read(&env);
    env.shutdown().await;
}

#[tokio::test]
async fn tasks_get_takes_its_poll_interval_from_the_runs_retry_after() {
    let yaml = format!("{}tasks: {{ pollIntervalMs: 250 }}\n", azure_tasks());
    let env = env_with_yaml(Flavor::Azure, &yaml, |_| {}).await;
    let r = env
        .call(
            A,
            "greeting",
            json!({"name": "Ed", "delayMs": 1500}),
            task_caps(),
        )
        .await;
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let t = task_status(&env, &task).await;
    assert_eq!(t["status"], "working", "{t}");
    assert_eq!(t["pollIntervalMs"], 1000, "the job's Retry-After: {t}");
    // A terminal job asks nothing: the configured interval.
    let t = settled_task(&env, &task).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["pollIntervalMs"], 250, "{t}");
    env.shutdown().await;
}

#[tokio::test]
async fn aip151_a_listen_follows_operations_by_reading_them_with_backoff() {
    let env = env_with_yaml(Flavor::Aip151, AIP151, |_| {}).await;
    let ok = tasked(&env, A, "cancellable", json!({"delayMs": 600})).await;
    let failed = tasked(&env, A, "failure", json!({})).await;
    let opened = std::time::Instant::now();
    let msgs = env
        .listen(A, vec![ok.clone(), failed.clone()], Duration::from_secs(10))
        .await;
    assert_eq!(
        msgs[0]["params"]["notifications"]["taskIds"],
        json!([ok, failed])
    );
    let notes = task_notes(&msgs);
    let of = |id: &str| -> Vec<String> {
        notes
            .iter()
            .filter(|n| n["params"]["taskId"] == id)
            .map(|n| {
                n["params"]["status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        of(&ok).last().map(String::as_str),
        Some("completed"),
        "{msgs:#?}"
    );
    assert_eq!(
        of(&failed).last().map(String::as_str),
        Some("completed"),
        "ext-tasks: a failed run is a completed task: {msgs:#?}"
    );
    assert_ended_with_its_result(&msgs);

    // The running operation was read on the backoff (50 ms doubling to 400 ms), never in a
    // loop, and no event log was asked for.
    let ops = operations(&env.host).await;
    let name = ops
        .iter()
        .filter_map(|o| o["name"].as_str())
        .find(|n| ok.contains(n.rsplit('/').next().unwrap_or("-")))
        .expect("the operation of the task")
        .to_string();
    let reads: Vec<_> = recorded(&env.host, "GET", &name)
        .into_iter()
        .filter(|q| q.at >= opened)
        .collect();
    assert!(
        (2..=12).contains(&reads.len()),
        "{} reads of a 600 ms operation",
        reads.len()
    );
    let min_gap = reads
        .windows(2)
        .map(|w| w[1].at.duration_since(w[0].at))
        .min()
        .unwrap();
    assert!(min_gap >= Duration::from_millis(50), "{min_gap:?}");
    assert_no_event_log_read(&env);
    env.shutdown().await;
}

/// A blocking call whose operation stops for a person is answered with the MRTR input request
/// read from the operation (`host.interrupts`), as `tasks/get` shows it: without an event log
/// the call was answered "still waiting" instead.
#[tokio::test]
async fn aip151_a_blocking_call_that_suspends_is_answered_with_the_input_request_of_its_operation()
{
    let env = env_with_yaml(Flavor::Aip151, AIP151, |_| {}).await;
    let r = env.call(A, "approval", json!({}), elicit()).await;
    assert_eq!(r.result()["resultType"], "input_required", "{}", r.text);
    assert!(r.result()["requestState"].is_string(), "{}", r.text);
    let ops = operations(&env.host).await;
    let asked = ops
        .iter()
        .find_map(|o| o["metadata"]["approval"]["id"].as_str())
        .expect("an operation awaiting approval");
    let req = &r.result()["inputRequests"][asked];
    assert_eq!(req["method"], "elicitation/create", "{}", r.text);
    assert!(
        req["params"]["requestedSchema"]["properties"]["action"]["enum"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("accept"))),
        "{}",
        r.text
    );
    env.shutdown().await;
}

/// A host that refuses a listen's read with `503` and `Retry-After` (RFC 9110 §10.2.3) is not
/// read again before that pause is over, as with a 429: the listen's backoff alone would read
/// it every few hundred milliseconds while it is down.
#[tokio::test]
async fn a_listen_waits_out_a_503_retry_after_before_reading_the_task_again() {
    use openwop_devhost::{Fault, FaultKind, RouteClass};
    let env = env_with_yaml(Flavor::Azure, &azure_tasks(), |c| {
        let follow = &mut std::sync::Arc::make_mut(&mut c.mapping).follow;
        follow.initial = Duration::from_millis(100);
        follow.max = Duration::from_millis(300);
    })
    .await;
    let r = env
        .call(
            A,
            "greeting",
            json!({"name": "Di", "delayMs": 8000}),
            task_caps(),
        )
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let listen = env.listen(A, vec![task.clone()], Duration::from_secs(5));
    let outage = async {
        // The listen is open and has read the job once or twice (its Retry-After is 1 s).
        tokio::time::sleep(Duration::from_millis(1500)).await;
        env.host.faults().reset_counts();
        env.host.faults().add(Fault {
            route: RouteClass::GetRun,
            kind: FaultKind::Status {
                status: 503,
                retry_after: Some(3),
            },
            times: None,
        });
        tokio::time::sleep(Duration::from_secs(3)).await;
        let reads = env.host.faults().count(RouteClass::GetRun);
        env.host.faults().clear();
        reads
    };
    let (msgs, reads) = tokio::join!(listen, outage);
    assert_eq!(
        msgs[0]["method"], "notifications/subscriptions/acknowledged",
        "{msgs:#?}"
    );
    // The first read after the outage began met the 503; the next is due 3 s later, after the
    // window. One read is one request (a 5xx that asks for a pause is not retried at once:
    // src/host/retry.rs); a read already on its way when the fault went in may add up to
    // three (its quick retries). Without the pause the listen's backoff read it 18 times here.
    assert!(
        (1..=4).contains(&reads),
        "{reads} requests in the 3 s after a 503 asked for a 3 s pause"
    );
    env.shutdown().await;
}

/// tasks/get as `A` from the sidecar at `url` (another replica in front of the same host).
async fn task_status_at(env: &Env, url: &str, task_id: &str) -> Value {
    let body = body_of(9, "tasks/get", json!({ "taskId": task_id }), task_caps());
    let r: Value = env
        .http
        .post(format!("{url}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tasks/get")
        .header("Mcp-Name", task_id)
        .bearer_auth(A)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(r.get("result").is_some(), "{r}");
    r["result"].clone()
}

/// ext-tasks (Task `createdAt`): when the task was created, the same on every read. A host
/// whose documents say no start time (the Azure-style mapping maps none) used to get the time
/// of each read instead; a sealed taskId now carries the time the task was created, so every
/// read, on any replica with the same key, answers the CreateTaskResult's `createdAt`.
#[tokio::test]
async fn created_at_is_the_same_on_every_read_and_replica_when_the_host_says_no_start_time() {
    let yaml = AZURE.replacen("host:\n", "host:\n  ids: { taskId: sealed }\n", 1);
    let key = |c: &mut openwop_mcp_sidecar::config::Config| {
        c.mcp.request_state_key = Some(openwop_mcp_sidecar::config::Secret::new(
            SUITE_STATE_KEY.to_vec(),
        ));
    };
    let env = env_with_yaml(Flavor::Azure, &yaml, key).await;
    let r = env
        .call(
            A,
            "greeting",
            json!({"name": "Fa", "delayMs": 20000}),
            task_caps(),
        )
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let created = r.result()["createdAt"].clone();
    assert!(created.is_string(), "{}", r.text);
    let first = task_status(&env, &task).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let second = task_status(&env, &task).await;
    assert_eq!(first["status"], "working", "{first}");
    assert_eq!(first["createdAt"], created, "{first}");
    assert_eq!(second["createdAt"], created, "{second}");
    assert_eq!(second["taskId"], task.as_str(), "{second}");

    // Another replica with the same state key reads the same task with the same createdAt.
    let replica = sidecar_with_yaml(&env.host, &yaml, key).await;
    let third = task_status_at(&env, &format!("http://{}", replica.addr), &task).await;
    assert_eq!(third["createdAt"], created, "{third}");
    replica.shutdown().await;

    cancel(&env, &task).await;
    env.shutdown().await;
}

/// An owed cancel that reaches a run which ended meanwhile is done, not a failure: the
/// Azure-style host refuses the cancel of a finished job with `409 OperationNotAllowed`, which
/// this mapping's error rules do not name "already ended"; the job's own status says so. Here
/// the client leaves a running job, the host asks the cancel to wait a second (`503` with
/// `Retry-After: 1`), and the job succeeds in that second.
#[tokio::test]
async fn an_owed_cancel_of_a_job_that_ended_meanwhile_counts_as_already_terminal() {
    use crate::support::fault::cancel_outcome;
    use openwop_devhost::{Fault, FaultKind, RouteClass};
    let env = env_with_yaml(Flavor::Azure, AZURE, |_| {}).await;
    let body = body_of(
        1,
        "tools/call",
        json!({"name": "greeting", "arguments": {"name": "Gu", "delayMs": 1500}}),
        json!({}),
    );
    let s = raw_post(&env, &body, "application/json", A).await;
    let mut job = None;
    for _ in 0..100 {
        if let Some(r) = env.host.status_monitor_reads().first() {
            job = Some(r.job.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let job = job.expect("the job was created");
    // The client leaves 0.9 s into the 1.5 s job (the call is still waiting: the job is read
    // once a second, as its Retry-After asks).
    tokio::time::sleep(Duration::from_millis(900)).await;
    env.host.faults().add(Fault {
        route: RouteClass::Cancel,
        kind: FaultKind::Status {
            status: 503,
            retry_after: Some(1),
        },
        times: Some(1),
    });
    drop(s);
    let outcomes = ["cancelled", "already_terminal", "refused", "gave_up"];
    let outcome = cancel_outcome(&env, &outcomes, Duration::from_secs(6)).await;
    assert_eq!(
        outcome.map(|(o, _)| o).as_deref(),
        Some("already_terminal"),
        "the job had ended"
    );
    let cancels = recorded(&env.host, "POST", &format!("/jobs/{job}/cancel"));
    assert_eq!(
        cancels.len(),
        2,
        "refused once with a pause, then once more"
    );
    let gap = cancels[1].at.duration_since(cancels[0].at);
    assert!(gap >= Duration::from_millis(950), "{gap:?}");
    env.shutdown().await;
}

/// `host.follow: poll` at its defaults, against a host that sends no `Retry-After` (the
/// AIP-151 flavour): a 5-second job's blocking call is answered within about half a second
/// of the job's end, not seconds later because the backoff had doubled past it.
#[tokio::test]
async fn a_polled_five_second_job_is_answered_within_half_a_second_of_its_end() {
    let yaml = AIP151.replace(
        "  follow: { mode: poll, initialIntervalMs: 50, maxIntervalMs: 400 }\n",
        "  follow: poll\n",
    );
    assert_ne!(yaml, AIP151, "the suite's quick intervals are removed");
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    let started = std::time::Instant::now();
    let r = env
        .call(A, "cancellable", json!({"delayMs": 5000}), json!({}))
        .await;
    let took = started.elapsed();
    assert!(r.body.get("result").is_some(), "{}", r.text);
    assert_ne!(r.result()["isError"], true, "{}", r.text);
    let ops = operations(&env.host).await;
    let op = ops
        .iter()
        .find(|o| o["done"] == true)
        .unwrap_or_else(|| panic!("the job ended: {ops:?}"));
    assert!(op.get("error").is_none(), "{op}");
    // The job itself takes 5 s from its create, which is made right after the call starts.
    assert!(took >= Duration::from_secs(5), "{took:?}");
    let late = took - Duration::from_secs(5);
    assert!(
        late < Duration::from_millis(900),
        "answered {late:?} after the job's end (the last wait is at most 500 ms)"
    );
    env.shutdown().await;
}
