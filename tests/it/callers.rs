//! `{caller.NAME}` values the host answers (`host.templates.callerFrom`): the AIP-151
//! flavour's createRun path needs the caller's project, and the flavour's `GET /v1/userinfo`
//! says which one a credential is, so the operator keeps no table that goes stale when tokens
//! rotate.

use openwop_devhost::Flavor;
use serde_json::json;

use crate::support::*;
use crate::templates::recorded;

/// The AIP-151 mapping whose createRun path takes the caller's project from the host's
/// userinfo answer, kept `ttl_ms` per credential.
fn with_project_from_host(ttl_ms: u64) -> String {
    crate::follow::AIP151
        .replace(
            "'/v1/projects/acme/jobTypes/{tool}:run'",
            "'/v1/projects/{caller.project}/jobTypes/{tool}:run'",
        )
        .replacen(
            "host:\n",
            &format!(
                "host:\n  templates: {{ callerFrom: {{ route: {{ path: /v1/userinfo }}, \
                 values: {{ project: /project }}, ttlMs: {ttl_ms} }} }}\n"
            ),
            1,
        )
}

#[tokio::test]
async fn each_caller_gets_its_project_from_the_host_asked_once_per_credential() {
    let env = env_with_yaml(Flavor::Aip151, &with_project_from_host(600_000), |_| {}).await;
    env.host.clear_requests();
    // Three calls at once under one credential: one userinfo read between them.
    let calls = (0..3).map(|_| env.call(A, "noop", json!({}), json!({})));
    for r in futures_util::future::join_all(calls).await {
        assert_ne!(r.result()["isError"], true, "{}", r.text);
        assert!(r.body.get("result").is_some(), "{}", r.text);
    }
    // Within the time it is kept, the answer serves later calls too.
    let r = env.call(A, "noop", json!({}), json!({})).await;
    assert!(r.body.get("result").is_some(), "{}", r.text);
    // Another credential gets its own value, from its own read.
    let r = env.call(B, "noop", json!({}), json!({})).await;
    assert!(r.body.get("result").is_some(), "{}", r.text);
    assert_ne!(r.result()["isError"], true, "{}", r.text);
    let paths: Vec<String> = recorded(&env.host, "POST", ":run")
        .into_iter()
        .map(|q| q.path)
        .collect();
    let acme = "/v1/projects/acme/jobTypes/conformance-noop:run";
    let globex = "/v1/projects/globex/jobTypes/conformance-noop:run";
    assert_eq!(
        paths,
        [acme, acme, acme, acme, globex],
        "each caller its own project"
    );
    let asked: Vec<String> = recorded(&env.host, "GET", "/v1/userinfo")
        .into_iter()
        .map(|q| {
            q.headers
                .into_iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v)
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        asked,
        [format!("Bearer {A}"), format!("Bearer {B}")],
        "once per credential, with the caller's own credential"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn a_kept_answer_is_asked_again_after_its_time() {
    let env = env_with_yaml(Flavor::Aip151, &with_project_from_host(300), |_| {}).await;
    env.host.clear_requests();
    let r = env.call(A, "noop", json!({}), json!({})).await;
    assert!(r.body.get("result").is_some(), "{}", r.text);
    let before = recorded(&env.host, "GET", "/v1/userinfo").len();
    assert!(before >= 1);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let r = env.call(A, "noop", json!({}), json!({})).await;
    assert!(r.body.get("result").is_some(), "{}", r.text);
    assert!(
        recorded(&env.host, "GET", "/v1/userinfo").len() > before,
        "the host is asked again once the answer's time is over"
    );
    env.shutdown().await;
}

/// A credential the host's userinfo route refuses is challenged exactly as one the
/// operator's table does not list: 401, `invalid_token`, so an OAuth client logs in; no
/// credential at all gets the challenge without an error code (RFC 6750 §3.1).
#[tokio::test]
async fn a_credential_the_host_refuses_gets_the_login_challenge() {
    let env = env_with_yaml(Flavor::Aip151, &with_project_from_host(600_000), |_| {}).await;
    env.host.clear_requests();
    for (who, error) in [
        (Some("not-a-key-the-host-knows"), Some("invalid_token")),
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
        assert_eq!(c.param("error"), error, "{who:?}: {www}");
    }
    assert!(
        recorded(&env.host, "POST", ":run").is_empty(),
        "no run is created for a credential without a value"
    );
    env.shutdown().await;
}

/// An answer without the value is a failure that names the pointer (in the log), never a
/// run created somewhere else.
#[tokio::test]
async fn an_answer_without_the_value_creates_nothing() {
    let yaml = with_project_from_host(600_000).replace("project: /project", "project: /tenant");
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    env.host.clear_requests();
    let r = env.call(A, "noop", json!({}), json!({})).await;
    assert_eq!(r.error_code(), Some(-32603), "{}", r.text);
    assert!(!r.text.contains("acme"), "{}", r.text);
    assert!(recorded(&env.host, "POST", ":run").is_empty());
    env.shutdown().await;
}

/// A 403 from the userinfo route is the host's refusal, answered as for any host call, and
/// not kept: the next call asks again.
#[tokio::test]
async fn a_refusal_of_the_userinfo_route_is_passed_on_and_not_kept() {
    use openwop_devhost::{Fault, FaultKind, RouteClass};
    let env = env_with_yaml(Flavor::Aip151, &with_project_from_host(600_000), |_| {}).await;
    env.host.clear_requests();
    // The first request of its class is the userinfo read (it comes before the catalog's).
    env.host.faults().add(Fault {
        route: RouteClass::Other,
        kind: FaultKind::Status {
            status: 403,
            retry_after: None,
        },
        times: Some(1),
    });
    let r = env.call(A, "noop", json!({}), json!({})).await;
    // As the mapping answers any 403 of this host without a step-up challenge: the refusal
    // named, not a login challenge (the credential is valid).
    assert_ne!(r.status, 401, "{}", r.text);
    assert!(r.error_code().is_some(), "{}", r.text);
    assert!(r.text.contains("403"), "{}", r.text);
    assert!(recorded(&env.host, "POST", ":run").is_empty());
    let r = env.call(A, "noop", json!({}), json!({})).await;
    assert_ne!(r.result()["isError"], true, "{}", r.text);
    assert!(r.body.get("result").is_some(), "{}", r.text);
    assert_eq!(recorded(&env.host, "GET", "/v1/userinfo").len(), 2);
    env.shutdown().await;
}
