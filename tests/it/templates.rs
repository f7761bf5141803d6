//! Route, query, header and body templates, and idempotency by header, body field
//! or none, against the devhost's flavours. Where a flavour's whole task flow cannot run yet
//! (its ids, statuses and catalog are later parts of the issue), the piece is proven at the
//! REST level: the real host client, configured from YAML, against the real flavour, and
//! the requests the devhost recorded.

use std::time::Duration;

use openwop_devhost::{Fault, FaultKind, Flavor, RouteClass};
use openwop_mcp_sidecar::host::{Caller, HostClient, HostError};
use serde_json::{json, Value};

use crate::support::*;

/// The real sidecar in front of a v2 devhost, configured by `yaml`.
async fn env_yaml(yaml: &str) -> Env {
    env_with_yaml(Flavor::V2, yaml, |_| {}).await
}

/// The sidecar's host client alone, configured by `yaml`, in front of `host`.
pub(crate) fn client(yaml: &str, host: &openwop_devhost::DevHost) -> HostClient {
    let cfg = config_of(yaml, host);
    let proxy = openwop_mcp_sidecar::passthrough::Passthrough::new(&cfg).unwrap();
    let metrics = openwop_mcp_sidecar::telemetry::Metrics::new();
    HostClient::new(&cfg, metrics, proxy.pool().clone()).unwrap()
}

pub(crate) fn caller(key: &str) -> Caller {
    Caller {
        authorization: Some(format!("Bearer {key}").parse().unwrap()),
        ..Caller::default()
    }
}

pub(crate) fn recorded(
    host: &openwop_devhost::DevHost,
    method: &str,
    path_end: &str,
) -> Vec<openwop_devhost::RecordedRequest> {
    host.requests()
        .into_iter()
        .filter(|r| r.method == method && r.path.ends_with(path_end))
        .collect()
}

#[tokio::test]
async fn the_sidecar_query_merges_into_a_template_query() {
    // The static catalog's credential probe adds `limit=1` to the listRuns route: after the
    // template's own query with `&`, never a second `?`.
    let env = env_yaml(
        "host:\n  routes:\n    listRuns: { path: '/runs?workflowId=conformance-noop' }\ntools:\n  source: static\n  static:\n    - { name: noop, workflowId: conformance-noop }\n",
    )
    .await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.result()["tools"][0]["name"], "noop", "{r:?}");
    let probes = recorded(&env.host, "GET", "/runs");
    assert_eq!(probes.len(), 1);
    assert_eq!(
        probes[0].query.as_deref(),
        Some("workflowId=conformance-noop&limit=1")
    );
    env.shutdown().await;
}

#[tokio::test]
async fn azure_api_version_survives_the_sidecar_query_and_a_call_id_names_the_put() {
    // Azure-style hosts refuse a call without exactly one `api-version` (devhost/src/azure.rs).
    let host = devhost_of(Flavor::Azure).await;
    let c = client(
        "host:\n  routes:\n    listRuns: { path: '/jobTypes?api-version=2026-01-01' }\n    createRun: { method: PUT, path: '/jobs/{callId}?api-version=2026-01-01' }\n  bodies:\n    createRun: { jobType: '{tool}', parameters: '{arguments}' }\n  fields: { createdRunId: /name, createdStatus: /status }\n",
        &host,
    );
    let who = caller(A);
    c.credential_probe(&who)
        .await
        .expect("one api-version, then limit");
    let probe = recorded(&host, "GET", "/jobTypes");
    assert_eq!(
        probe[0].query.as_deref(),
        Some("api-version=2026-01-01&limit=1")
    );

    // A create names its job with the call's own value: the same on a replay, so the host
    // answers the replay with the first job (an identical PUT), never a second job.
    let args = json!({"delayMs": 20000});
    let call_id = "0b8f2a6e-3c1d-4e5f-9a7b-1c2d3e4f5a6b";
    let create = c
        .prepare_create(&who, None, "conformance-cancellable", &args, &[], call_id)
        .unwrap();
    let first = c
        .create_run(&who, &create)
        .await
        .expect("PUT creates the job");
    let again = c
        .create_run(&who, &create)
        .await
        .expect("the same PUT answers the same job");
    assert_eq!(first.run_id, call_id);
    assert_eq!(again.run_id, call_id);
    let puts = recorded(&host, "PUT", &format!("/jobs/{call_id}"));
    assert_eq!(puts.len(), 2);
    assert_eq!(puts[0].body, puts[1].body, "a replay is the same request");
    assert_eq!(
        serde_json::from_slice::<Value>(&puts[0].body).unwrap(),
        json!({"jobType": "conformance-cancellable", "parameters": {"delayMs": 20000}})
    );
    host.shutdown().await;
}

/// The AIP-151 mapping of these tests: operations named `operations/op-…` travel raw in
/// `/v1/{runId}:cancel`; creates are deduped by AIP-155 `requestId`.
const AIP151: &str = "host:\n  ids: { path: raw }\n  idempotency: { bodyField: /requestId }\n  fields: { createdRunId: /name, createdStatus: /metadata/state }\n  routes:\n    createRun: { path: '/v1/projects/acme/jobTypes/{tool}:run', timeoutMs: 300 }\n    cancelRun: { path: '/v1/{runId}:cancel' }\n  bodies:\n    createRun: { parameters: '{arguments}' }\n";

/// [`AIP151`] behind the mount, with a static tool. Its catalog and status reading are tested
/// elsewhere (tests/it/catalog.rs), so the tool is static; the static catalog's credential probe sends
/// `limit=1`, which this strict host refuses on every route, so listRuns points at the
/// devhost's own fault switches (a read that takes any query) for these tests only.
fn aip151_mount() -> String {
    format!(
        "{}    cancelRun: {{}}\ntools:\n  source: static\n  static:\n    - {{ name: cancellable, workflowId: conformance-cancellable }}\n",
        AIP151.replace("  routes:\n", "  routes:\n    listRuns: { path: /_devhost/faults }\n")
    )
}

/// Waits until the host's only operation is done.
async fn settled(host: &openwop_devhost::DevHost) -> Vec<Value> {
    let mut ops = Vec::new();
    for _ in 0..60 {
        ops = operations(host).await;
        if !ops.is_empty() && ops.iter().all(|o| o["done"] == true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ops
}

pub(crate) async fn operations(host: &openwop_devhost::DevHost) -> Vec<Value> {
    let r = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{}/v1/operations", host.base_url()))
        .bearer_auth(A)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    v["operations"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_lost_create_answer_replayed_with_the_same_request_id_leaves_one_job() {
    let host = devhost_of(Flavor::Aip151).await;
    let c = client(&format!("{AIP151}    cancelRun: {{}}\n"), &host);
    let who = caller(A);
    // The first answer is held back past the route timeout (the host did create the job);
    // the repeat carries the same requestId, so the host answers it with the first job.
    host.faults().add(Fault {
        route: RouteClass::CreateRun,
        kind: FaultKind::Delay { ms: 1000 },
        times: Some(1),
    });
    let args = json!({"delayMs": 20000});
    let call_id = "5d1e7c0a-9b2f-4c3d-8e4f-a1b2c3d4e5f6";
    let create = c
        .prepare_create(&who, None, "conformance-cancellable", &args, &[], call_id)
        .unwrap();
    let created = c
        .create_run(&who, &create)
        .await
        .expect("the repeat finds the job");
    let runs = recorded(&host, "POST", "/jobTypes/conformance-cancellable:run");
    assert_eq!(runs.len(), 2, "the lost answer, then one repeat");
    assert_eq!(runs[0].body, runs[1].body, "the repeat is the same request");
    let body: Value = serde_json::from_slice(&runs[0].body).unwrap();
    assert_eq!(
        body,
        json!({"parameters": {"delayMs": 20000}, "requestId": call_id})
    );
    assert!(
        runs[0].header("idempotency-key").is_none(),
        "the key travels in the body only"
    );
    let ops = operations(&host).await;
    assert_eq!(ops.len(), 1, "one job for both requests: {ops:?}");
    assert_eq!(ops[0]["name"], created.run_id.as_str());

    // A strict host (unknown body fields refused) accepts the `{}` cancel of the mapping.
    c.cancel_run_once(&who, &created.run_id, "mcp-request-cancelled")
        .await
        .expect("`:cancel` with {} is accepted");
    let cancel = recorded(&host, "POST", ":cancel");
    assert_eq!(cancel[0].path, format!("/v1/{}:cancel", created.run_id));
    assert_eq!(cancel[0].body, b"{}");
    let ops = operations(&host).await;
    assert_eq!(ops[0]["done"], true);
    assert_eq!(ops[0]["error"]["code"], 1, "cancelled: {ops:?}");
    host.shutdown().await;
}

#[tokio::test]
async fn a_strict_host_refuses_the_default_cancel_reason_so_the_body_is_a_template() {
    // The contrast: the v2 cancel body `{reason}` is refused by a host that refuses unknown
    // fields; that is why a cancel body of `{}` must be expressible.
    let host = devhost_of(Flavor::Aip151).await;
    let c = client(AIP151, &host);
    let who = caller(A);
    let args = json!({"delayMs": 20000});
    let create = c
        .prepare_create(
            &who,
            None,
            "conformance-cancellable",
            &args,
            &[],
            "7e6d5c4b-3a29-4817-a6b5-c4d3e2f1a0b9",
        )
        .unwrap();
    let created = c.create_run(&who, &create).await.unwrap();
    let e = c
        .cancel_run_once(&who, &created.run_id, "mcp-request-cancelled")
        .await
        .unwrap_err();
    assert!(
        matches!(&e, HostError::Status { status, .. } if status.as_u16() == 400),
        "{e:?}"
    );
    let strict = client(&format!("{AIP151}    cancelRun: {{}}\n"), &host);
    strict
        .cancel_run_once(&who, &created.run_id, "mcp-request-cancelled")
        .await
        .unwrap();
    host.shutdown().await;
}

#[tokio::test]
async fn a_disconnected_call_is_cancelled_with_an_empty_cancel_body() {
    let env = env_yaml("host:\n  bodies:\n    cancelRun: {}\n").await;
    let run_id = a_disconnected_delay_call_is_cancelled(&env).await;
    let cancels = env.host_cancels(&run_id);
    assert_eq!(cancels.len(), 1);
    assert_eq!(cancels[0].body, b"{}", "no reason field");
    env.shutdown().await;
}

#[tokio::test]
async fn without_idempotency_a_lost_create_is_never_replayed() {
    // `host.idempotency: none`: a repeat could start a second job, so the sidecar sends
    // createRun once, tells the client the call failed and leaves the job it cannot find.
    let env =
        env_yaml("host:\n  idempotency: none\n  routes:\n    createRun: { timeoutMs: 300 }\n")
            .await;
    let before = env.run_ids(A, "conformance-cancellable").await;
    env.host
        .faults()
        .delay(RouteClass::CreateRun, Duration::from_millis(1500));
    let r = env
        .call(
            A,
            "conformance-cancellable",
            json!({"delayMs": 20000}),
            json!({}),
        )
        .await;
    assert_eq!(r.error_code(), Some(-32603), "{r:?}");
    tokio::time::sleep(Duration::from_millis(1800)).await;
    env.host.faults().clear();
    let creates = recorded(&env.host, "POST", "/runs");
    assert_eq!(creates.len(), 1, "neither retried nor replayed");
    assert!(creates[0].header("idempotency-key").is_none());
    let after = env.run_ids(A, "conformance-cancellable").await;
    let fresh: Vec<&String> = after.iter().filter(|i| !before.contains(i)).collect();
    assert_eq!(fresh.len(), 1, "no second job");
    // The documented fate: the job the sidecar cannot find runs on.
    assert_eq!(env.status(A, fresh[0]).await, "running");
    let _ = env
        .rest_post(
            A,
            &format!(
                "/runs/{}/cancel",
                openwop_mcp_sidecar::wire_id::project(fresh[0])
            ),
            json!({}),
        )
        .await;
    env.shutdown().await;
}

#[tokio::test]
async fn arguments_and_allowed_headers_fill_the_create_target() {
    let env = env_yaml(
        "host:\n  templates: { allowHeaders: [x-project] }\n  routes:\n    createRun: { path: '/runs?project={header.x-project}&delay={arg.delayMs}' }\n",
    )
    .await;
    let e = &env;
    let send = |project: Option<&'static str>, args: Value| {
        let body = body_of(
            1,
            "tools/call",
            json!({"name": "conformance-delay", "arguments": args}),
            json!({}),
        );
        let mut h = vec![
            ("authorization", format!("Bearer {A}")),
            ("MCP-Protocol-Version", V.to_string()),
            ("Mcp-Method", "tools/call".to_string()),
            ("Mcp-Name", "conformance-delay".to_string()),
        ];
        if let Some(p) = project {
            h.push(("x-project", p.to_string()));
        }
        async move { e.raw(&h, body.to_string()).await }
    };
    // A placeholder the call cannot fill is the caller's mistake, named, before any createRun.
    let r = send(Some("p 1"), json!({})).await;
    assert_eq!(r.error_code(), Some(-32602), "{r:?}");
    let msg = r.body["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("missing argument 'delayMs'"), "{msg}");
    let r = send(None, json!({"delayMs": 5})).await;
    assert_eq!(r.error_code(), Some(-32602), "{r:?}");
    let msg = r.body["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("missing request header 'x-project'"), "{msg}");
    assert!(recorded(&env.host, "POST", "/runs").is_empty());

    let r = send(Some("p 1"), json!({"delayMs": 5})).await;
    assert!(r.body.get("result").is_some(), "{r:?}");
    let creates = recorded(&env.host, "POST", "/runs");
    assert_eq!(creates[0].query.as_deref(), Some("project=p%201&delay=5"));
    env.shutdown().await;
}

#[tokio::test]
async fn a_lost_create_answer_through_the_mount_is_recovered_by_request_id_alone() {
    // The whole tools/call path against the AIP-151 flavour, which dedupes creates by
    // `requestId` and ignores `Idempotency-Key` (see `aip151_mount`).
    let yaml = aip151_mount();
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    env.host
        .faults()
        .delay(RouteClass::CreateRun, Duration::from_millis(2000));
    let r = env
        .call(A, "cancellable", json!({"delayMs": 20000}), json!({}))
        .await;
    assert_eq!(
        r.error_code(),
        Some(-32603),
        "every attempt timed out: {r:?}"
    );
    env.host.faults().clear();
    // The replay (same requestId) learns the job and the owed cancel ends it.
    let mut ops = Vec::new();
    for _ in 0..50 {
        ops = operations(&env.host).await;
        if ops.iter().all(|o| o["done"] == true) && !ops.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        ops.len(),
        1,
        "one job for every attempt and the replay: {ops:?}"
    );
    assert_eq!(ops[0]["done"], true, "{ops:?}");
    assert_eq!(ops[0]["error"]["code"], 1, "cancelled: {ops:?}");
    let runs = recorded(&env.host, "POST", "/jobTypes/conformance-cancellable:run");
    assert!(runs.len() >= 2, "the create was repeated");
    assert!(
        runs.iter().all(|q| q.body == runs[0].body),
        "every repeat is the same request (same requestId)"
    );
    let cancels = recorded(&env.host, "POST", ":cancel");
    assert_eq!(cancels.len(), 1);
    assert_eq!(cancels[0].body, b"{}");
    env.shutdown().await;
}

#[tokio::test]
async fn a_client_gone_while_create_is_in_flight_leaves_no_job_on_a_request_id_host() {
    // The client leaves before the createRun answer: the run id is unknown, so the mount
    // replays the create with the same requestId, learns the job and cancels it with `{}`.
    let env = env_with_yaml(Flavor::Aip151, &aip151_mount(), |_| {}).await;
    env.host
        .faults()
        .delay(RouteClass::CreateRun, Duration::from_millis(800));
    let body = body_of(
        1,
        "tools/call",
        json!({"name": "cancellable", "arguments": {"delayMs": 30000}}),
        json!({}),
    );
    let s = raw_post(&env, &body, "application/json", A).await;
    for _ in 0..50 {
        if !operations(&env.host).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(s);
    tokio::time::sleep(Duration::from_millis(900)).await;
    env.host.faults().clear();
    let ops = settled(&env.host).await;
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(ops[0]["error"]["code"], 1, "cancelled: {ops:?}");
    let cancels = recorded(&env.host, "POST", ":cancel");
    assert_eq!(cancels.len(), 1);
    assert_eq!(cancels[0].body, b"{}");
    env.shutdown().await;
}

#[tokio::test]
async fn route_header_templates_are_filled_beside_the_configured_version_header() {
    // The two halves of templates on one request: a route's header values are templates filled with
    // the call's values, and the version header is the configured one (`host.versionHeader`),
    // not OpenWOP's.
    let host = devhost_of(Flavor::V2).await;
    let c = client(
        "host:\n  versionHeader: { name: X-Api-Version, value: '7' }\n  templates: { allowHeaders: [x-project] }\n  routes:\n    getRun: { path: '/runs/{runId}', headers: { X-Run: 'run {runId}', X-Project: '{header.x-project}' } }\n",
        &host,
    );
    let mut who = caller(A);
    let call_id = "5d0c7a1e-2b3f-4c5d-8e9f-0a1b2c3d4e5f";
    let create = c
        .prepare_create(&who, None, "conformance-noop", &json!({}), &[], call_id)
        .unwrap();
    let run = c.create_run(&who, &create).await.expect("the run is made");

    let wire = openwop_mcp_sidecar::wire_id::project(&run.run_id);
    let gets = || -> Vec<openwop_devhost::RecordedRequest> { recorded(&host, "GET", &wire) };
    // Without the allowed header the getRun is not sent at all.
    assert!(c.get_run(&who, &run.run_id).await.is_err());
    assert!(gets().is_empty());

    let mut h = http::HeaderMap::new();
    h.insert("x-project", "p-1".parse().unwrap());
    who.headers = Some(std::sync::Arc::new(h));
    c.get_run(&who, &run.run_id).await.expect("getRun answers");
    let gets = gets();
    assert_eq!(gets.len(), 1);
    let header = |n: &str| {
        gets[0]
            .headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(header("x-run"), Some(format!("run {wire}").as_str()));
    assert_eq!(header("x-project"), Some("p-1"));
    assert_eq!(header("x-api-version"), Some("7"));
    assert_eq!(header("openwop-version"), None);
}

/// The AIP-151 mapping whose createRun path takes the caller's project from a table the
/// operator keeps (`host.templates.callerValues`), binding A to `acme` and B to `globex`: the
/// table's folder is returned to be removed.
fn with_caller_projects() -> (String, std::path::PathBuf) {
    let (dir, _) = config_dir("caller-values", "{}");
    let table = dir.join("projects.json");
    std::fs::write(&table, format!(r#"{{"{A}": "acme", "{B}": "globex"}}"#)).unwrap();
    let yaml = crate::follow::AIP151
        .replace(
            "'/v1/projects/acme/jobTypes/{tool}:run'",
            "'/v1/projects/{caller.project}/jobTypes/{tool}:run'",
        )
        .replacen(
            "host:\n",
            &format!(
                "host:\n  templates: {{ callerValues: {{ project: {{ file: '{}' }} }} }}\n",
                table.display()
            ),
            1,
        );
    (yaml, dir)
}

#[tokio::test]
async fn each_caller_gets_its_own_project_segment_from_its_credential() {
    // The AIP-151 flavour accepts only the caller's own project in a path: one fixed
    // project cannot serve two tenants. The operator binds each credential to its project.
    let (yaml, dir) = with_caller_projects();
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    for key in [A, B] {
        let r = env.call(key, "noop", json!({}), json!({})).await;
        assert!(r.body.get("result").is_some(), "{key}: {}", r.text);
        assert_ne!(r.result()["isError"], true, "{key}: {}", r.text);
    }
    let paths: Vec<String> = recorded(&env.host, "POST", ":run")
        .into_iter()
        .map(|q| q.path)
        .collect();
    assert_eq!(
        paths,
        [
            "/v1/projects/acme/jobTypes/conformance-noop:run",
            "/v1/projects/globex/jobTypes/conformance-noop:run"
        ],
        "each caller its own project"
    );
    // A credential the operator bound no project to gets none, and no other caller's: the
    // call is refused before anything is sent, as a credential the mount cannot act under
    // (tests/it/oauth.rs has the challenge's login parameters).
    let r = env.call(READONLY, "noop", json!({}), json!({})).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert!(!r.text.contains("acme"), "{}", r.text);
    assert_eq!(recorded(&env.host, "POST", ":run").len(), 2);
    env.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// An OAuth client learns it must log in from a 401 and its challenge (MCP 2026-07-28
/// "Authorization"); a `-32602` in a 200 would leave it never prompted. A credential without
/// a caller value, whether the host would take it or not, is challenged exactly like one the
/// host refuses, before anything is sent.
#[tokio::test]
async fn a_credential_without_caller_values_gets_the_login_challenge_not_32602() {
    use openwop_mcp_sidecar::config::auth::{Auth, HostMetadata};
    let (yaml, dir) = with_caller_projects();
    let env = env_with_yaml(Flavor::Aip151, &yaml, |c| {
        c.auth = Some(Auth {
            authorization_servers: vec!["https://id.example.com".into()],
            scopes: vec!["runs:create".into()],
            resource: None,
            resource_documentation: None,
            host_metadata: HostMetadata::Ignore,
            require_token: false,
            metadata_max_age_seconds: 3600,
        })
    })
    .await;
    env.host.clear_requests();
    let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", env.url);
    for (who, error) in [
        (Some("not-a-key-anyone-bound"), Some("invalid_token")),
        (Some(READONLY), Some("invalid_token")),
        // No credential at all: RFC 6750 §3.1, a challenge without an error code.
        (None, None),
    ] {
        let r = env
            .rpc(
                who,
                "tools/call",
                json!({"name": "noop", "arguments": {}}),
                json!({}),
            )
            .await;
        assert_eq!(r.status, 401, "{who:?}: {}", r.text);
        assert_eq!(r.error_code(), Some(-32600), "{who:?}: {}", r.text);
        let www = r
            .headers
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let parsed = openwop_mcp_sidecar::auth::parse(&www);
        let c = parsed
            .iter()
            .find(|c| c.scheme == "Bearer")
            .unwrap_or_else(|| panic!("{who:?}: a Bearer challenge: {www}"));
        assert_eq!(
            c.param("resource_metadata"),
            Some(metadata.as_str()),
            "{www}"
        );
        assert_eq!(c.param("scope"), Some("runs:create"), "{www}");
        assert_eq!(c.param("error"), error, "{who:?}: {www}");
        assert!(!www.contains("acme") && !www.contains("globex"), "{www}");
    }
    assert!(
        recorded(&env.host, "POST", ":run").is_empty(),
        "nothing was sent to the host"
    );
    env.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_missing_allowed_header_outside_create_is_the_callers_mistake_named() {
    let env = env_yaml(
        "host:\n  templates: { allowHeaders: [x-project] }\n  routes:\n    getRun: { path: '/runs/{runId}?project={header.x-project}' }\n",
    )
    .await;
    let send = |method: &'static str, params: Value, project: Option<&'static str>| {
        let mut h = vec![
            ("authorization", format!("Bearer {A}")),
            ("MCP-Protocol-Version", V.to_string()),
            ("Mcp-Method", method.to_string()),
        ];
        if let Some(n) = params["name"].as_str().or(params["taskId"].as_str()) {
            h.push(("Mcp-Name", n.to_string()));
        }
        if let Some(p) = project {
            h.push(("x-project", p.to_string()));
        }
        let body = body_of(1, method, params, task_caps());
        let e = &env;
        async move { e.raw(&h, body.to_string()).await }
    };
    let r = send(
        "tools/call",
        json!({"name": "conformance-delay", "arguments": {"delayMs": 5000}}),
        Some("p1"),
    )
    .await;
    let task = r.result()["taskId"].as_str().expect("a task").to_string();
    let r = send("tasks/get", json!({ "taskId": task }), Some("p1")).await;
    assert_eq!(r.result()["status"], "working", "{r:?}");
    let r = send("tasks/get", json!({ "taskId": task }), None).await;
    assert_eq!(r.error_code(), Some(-32602), "{r:?}");
    let msg = r.body["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("missing request header 'x-project'"), "{msg}");
    let r = send("tasks/cancel", json!({ "taskId": task }), Some("p1")).await;
    assert!(r.body.get("result").is_some(), "{r:?}");
    env.shutdown().await;
}
