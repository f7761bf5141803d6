//! Everything that is not the MCP mount reaches the host unchanged.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn rest_run_lifecycle_passes_through_unchanged() {
    let env = env().await;
    let (s, created) = env
        .rest_post(A, "/runs", json!({ "workflowId": "conformance-approval" }))
        .await;
    assert_eq!(s, 201, "{created}");
    let run_id = created["runId"].as_str().unwrap().to_string();
    env.wait_status(A, &run_id, &["waiting-approval"], 5).await;
    let (s, list) = env
        .rest_get(A, "/runs?workflowId=conformance-approval&limit=10")
        .await;
    assert_eq!(s, 200);
    assert!(list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["runId"] == run_id.as_str()));
    let wire = openwop_mcp_sidecar::wire_id::project(&run_id);
    let (s, r) = env
        .rest_post(
            A,
            &format!("/runs/{wire}/interrupts/gate"),
            json!({ "resumeValue": { "action": "accept" } }),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        env.wait_status(A, &run_id, &["completed"], 5).await,
        "completed"
    );
    let (s, r) = env
        .rest_post(
            A,
            &format!("/runs/{wire}/cancel"),
            json!({ "reason": "late" }),
        )
        .await;
    assert_eq!(
        (s, r["error"].as_str()),
        (409, Some("run_terminal")),
        "host's 409 passes through as it is"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn tilde_and_percent_ids_reach_the_host_byte_for_byte() {
    let env = env().await;
    let (_, created) = env
        .rest_post(A, "/runs", json!({ "workflowId": "conformance-noop" }))
        .await;
    let run_id = created["runId"].as_str().unwrap().to_string();
    let tilde = format!("/runs/{}", openwop_mcp_sidecar::wire_id::project(&run_id));
    let percent = format!("/runs/{}", run_id.replace('/', "%2F"));
    for path in [&tilde, &percent] {
        env.host.clear_requests();
        let (s, v) = env.rest_get(A, path).await;
        assert_eq!(s, 200, "{path}: {v}");
        assert_eq!(v["runId"], run_id.as_str());
        let seen: Vec<String> = env.host.requests().into_iter().map(|r| r.path).collect();
        assert_eq!(
            seen,
            vec![path.to_string()],
            "the raw path must not be decoded or re-encoded"
        );
    }
    env.shutdown().await;
}

#[tokio::test]
async fn run_events_stream_through_while_the_run_is_still_going() {
    let env = env().await;
    let (_, created) = env
        .rest_post(
            A,
            "/runs",
            json!({ "workflowId": "conformance-delay", "inputs": { "delayMs": 3000 } }),
        )
        .await;
    let run_id = created["runId"].as_str().unwrap().to_string();
    let wire = openwop_mcp_sidecar::wire_id::project(&run_id);
    let mut resp = env
        .http
        .get(format!("{}/runs/{wire}/events", env.url))
        .header("Authorization", format!("Bearer {A}"))
        .header("Accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let first = tokio::time::timeout(Duration::from_secs(2), resp.chunk())
        .await
        .expect("first frame within 2 s")
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&first);
    assert!(text.contains("run.started"), "{text}");
    assert_eq!(
        env.status(A, &run_id).await,
        "running",
        "the first event arrived before the run ended"
    );
    // Resume with Last-Event-ID through the sidecar too.
    let resumed = env
        .http
        .get(format!("{}/runs/{wire}/events", env.url))
        .header("Authorization", format!("Bearer {A}"))
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(2), async { resumed.bytes_stream() })
        .await
        .unwrap();
    drop(first);
    let (s, poll) = env
        .rest_get(A, &format!("/runs/{wire}/events/poll?timeout=1"))
        .await;
    assert_eq!(s, 200);
    assert!(poll["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "run.started"));
    env.shutdown().await;
}

#[tokio::test]
async fn tenant_isolation_is_the_hosts_and_survives_the_proxy() {
    let env = env().await;
    let (_, created) = env
        .rest_post(A, "/runs", json!({ "workflowId": "conformance-noop" }))
        .await;
    let run_id = created["runId"].as_str().unwrap().to_string();
    let (s, v) = env
        .rest_get(B, &format!("/runs/{}", run_id.replace('/', "%2F")))
        .await;
    assert_eq!((s, v["error"].as_str()), (403, Some("id_tenant_mismatch")));
    assert!(!env.run_ids(B, "conformance-noop").await.contains(&run_id));
    env.shutdown().await;
}

#[tokio::test]
async fn dead_upstream_is_a_502_with_an_openwop_body() {
    let env = env_with(|c| c.upstream.url = "http://127.0.0.1:9".into()).await;
    let (s, v) = env.rest_get(A, "/runs").await;
    assert_eq!(s, 502);
    assert_eq!(v["error"], "upstream_unavailable");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
    let r = env
        .http
        .get(format!("{}/readyz", env.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503, "not ready while the host is unreachable");
    let r = env
        .http
        .get(format!("{}/healthz", env.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "alive all the same");
    env.shutdown().await;
}

#[tokio::test]
async fn readyz_answers_when_the_host_does() {
    let env = env().await;
    let r = env
        .http
        .get(format!("{}/readyz", env.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    env.shutdown().await;
}

#[tokio::test]
async fn hop_by_hop_fields_stop_at_the_proxy_and_x_forwarded_for_names_the_client() {
    // RFC 9110 §7.6.1: the connection's own fields (and any `Connection` names) are not
    // forwarded; `X-Forwarded-For` gains the client's address after any the request carried.
    let env = env().await;
    let send = |extra: &[(&'static str, &'static str)]| {
        let mut rb = env
            .http
            .get(format!("{}/runs?limit=1", env.url))
            .header("Authorization", format!("Bearer {A}"))
            .header("OpenWOP-Version", "2.0");
        for (k, v) in extra {
            rb = rb.header(*k, *v);
        }
        rb.send()
    };
    let seen = |env: &Env| {
        env.host
            .requests()
            .into_iter()
            .rfind(|r| r.path == "/runs" && r.header("x-forwarded-for").is_some())
            .expect("the host received the forwarded request")
    };
    let r = send(&[
        ("Connection", "x-hop-secret"),
        ("x-hop-secret", "1"),
        ("Keep-Alive", "timeout=5"),
        ("Proxy-Authorization", "Basic c2VjcmV0"),
        ("TE", "trailers"),
        ("X-Forwarded-For", "203.0.113.9"),
        ("x-kept", "yes"),
    ])
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let got = seen(&env);
    for gone in ["x-hop-secret", "keep-alive", "proxy-authorization", "te"] {
        assert!(got.header(gone).is_none(), "{gone} was forwarded: {got:?}");
    }
    assert_eq!(got.header("x-kept"), Some("yes"), "{got:?}");
    assert_eq!(
        got.header("x-forwarded-for"),
        Some("203.0.113.9, 127.0.0.1"),
        "{got:?}"
    );
    // Without hop-by-hop fields or a previous hop, twice (the second from the kept value).
    for _ in 0..2 {
        let before = env.host.requests().len();
        let r = send(&[("x-kept", "again")]).await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(env.host.requests().len() > before);
        let got = seen(&env);
        assert_eq!(got.header("x-kept"), Some("again"), "{got:?}");
        assert_eq!(got.header("x-forwarded-for"), Some("127.0.0.1"), "{got:?}");
    }
    env.shutdown().await;
}
