//! RFC 0198 §A: the host's discovery document gains the `mcp` family.

use serde_json::{json, Value};

use crate::support::*;

async fn discovery(
    env: &Env,
    inm: Option<&str>,
    host: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut rb = env
        .http
        .get(format!("{}/.well-known/openwop", env.url))
        .header("OpenWOP-Version", "2.0");
    if let Some(t) = inm {
        rb = rb.header("If-None-Match", t);
    }
    if let Some(h) = host {
        rb = rb.header("Host", h);
    }
    let r = rb.send().await.unwrap();
    let s = r.status().as_u16();
    let h = r.headers().clone();
    (s, h, r.text().await.unwrap())
}

#[tokio::test]
async fn discovery_advertises_the_mount_and_keeps_the_host_document() {
    let env = env().await;
    let (s, h, body) = discovery(&env, None, None).await;
    assert_eq!(s, 200);
    assert_eq!(h["openwop-version"], "2.0");
    let doc: Value = serde_json::from_str(&body).unwrap();
    let mcp = &doc["mcp"];
    assert_eq!(mcp["profiles"], json!(["mcp-2026-07-28"]));
    assert_eq!(mcp["revisions"], json!(["2026-07-28"]));
    assert_eq!(
        mcp["features"],
        json!(["server-discover", "mrtr", "cacheable-lists", "extensions"])
    );
    assert_eq!(
        mcp["serverMount"],
        json!({ "transports": ["streamable-http"] })
    );
    assert_eq!(
        mcp["serverUrls"],
        json!([env.mcp_url()]),
        "absolute URL from an allowed Host"
    );
    for k in ["preferredVersion", "minimumRevision", "refreshedAt"] {
        assert!(mcp[k].is_string(), "{k}");
    }
    assert!(
        doc["fixtures"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "conformance-approval"),
        "host keys kept"
    );
    assert!(doc["runList"].is_object());
    // server/discover and the document agree (M2, T1).
    let d = env
        .rpc(Some(A), "server/discover", json!({}), json!({}))
        .await;
    assert_eq!(d.result()["supportedVersions"], mcp["revisions"]);
    assert_eq!(
        d.result()["capabilities"]["extensions"],
        json!({ TASKS: {} })
    );
    env.shutdown().await;
}

#[tokio::test]
async fn augmented_document_has_its_own_etag_and_304() {
    let env = env().await;
    let (_, h, body) = discovery(&env, None, None).await;
    let etag = h["etag"].to_str().unwrap().to_string();
    let host_etag = reqwest::get(format!("{}/.well-known/openwop", env.host.base_url()))
        .await
        .unwrap()
        .headers()["etag"]
        .to_str()
        .unwrap()
        .to_string();
    assert_ne!(
        etag, host_etag,
        "the host's validator does not describe the augmented bytes"
    );
    let (s, h2, body2) = discovery(&env, Some(&etag), None).await;
    assert_eq!(s, 304);
    assert!(body2.is_empty());
    assert_eq!(h2["etag"].to_str().unwrap(), etag);
    assert_eq!(h2["openwop-version"], "2.0");
    let (s, _, body3) = discovery(&env, Some(&host_etag), None).await;
    assert_eq!(s, 200, "the host's own ETag does not match ours");
    assert_eq!(body3, body, "byte-identical across calls");
    env.shutdown().await;
}

#[tokio::test]
async fn server_urls_never_come_from_an_unvalidated_host_header() {
    let env = env().await;
    let (_, _, body) = discovery(&env, None, Some("evil.example:80")).await;
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["mcp"]["serverUrls"], json!(["/mcp"]));
    env.shutdown().await;
}

#[tokio::test]
async fn tasks_switch_off_removes_both_advertisements() {
    let env = env_with(|c| c.tasks.enabled = false).await;
    let (_, _, body) = discovery(&env, None, None).await;
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert!(!doc["mcp"]["features"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f == "extensions"));
    let d = env
        .rpc(Some(A), "server/discover", json!({}), json!({}))
        .await;
    assert!(d.result()["capabilities"].get("extensions").is_none());
    let t = env
        .rpc(
            Some(A),
            "tasks/get",
            json!({"taskId":"acme~2Fr-AAAAAAAAAAAAAAAAAAAAAAAA"}),
            task_caps(),
        )
        .await;
    assert_eq!((t.status, t.error_code()), (404, Some(-32601)));
    env.shutdown().await;
}
