//! The mount serves every Host a deployment uses (Service names, ingress names, a
//! proxy's Host); the DNS-rebinding defence is the Origin check; and a served Host is never
//! trusted into the URLs the sidecar advertises.

use serde_json::{json, Value};

use crate::support::*;

const SERVICE_HOST: &str = "openwop-mcp-sidecar.workflows.svc.cluster.local:8080";

fn list_headers(extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("MCP-Protocol-Version", V.to_string()),
        ("Mcp-Method", "tools/list".to_string()),
        ("Authorization", format!("Bearer {A}")),
    ];
    v.extend(extra.iter().map(|(k, x)| (*k, x.to_string())));
    v
}

fn list_body() -> String {
    body_of(1, "tools/list", json!({}), json!({})).to_string()
}

#[tokio::test]
async fn request_without_origin_is_served_for_any_host() {
    let env = env().await;
    for host in [
        SERVICE_HOST,
        "openwop-mcp-sidecar",
        "openwop-mcp-sidecar.workflows.svc",
        "mcp.example.test",
        "10.12.0.7:8080",
        "[fd00::7]:8080",
    ] {
        let r = env.raw(&list_headers(&[("Host", host)]), list_body()).await;
        assert_eq!(r.status, 200, "{host}: {}", r.text);
        assert!(r.result()["tools"].is_array(), "{host}: {}", r.text);
    }
    env.shutdown().await;
}

#[tokio::test]
async fn a_foreign_origin_is_refused_naming_the_origin_even_when_it_matches_the_host() {
    let env = env().await;
    // DNS rebinding: the attacker's page on evil.example, its name re-pointed at this machine.
    // The browser sends the attacker's name as both Origin and Host.
    for (origin, host) in [
        ("http://evil.example:8080", "evil.example:8080"),
        ("https://evil.example", SERVICE_HOST),
        ("null", "localhost"),
    ] {
        let r = env
            .raw(
                &list_headers(&[("Origin", origin), ("Host", host)]),
                list_body(),
            )
            .await;
        assert_eq!(r.status, 403, "{origin}: {}", r.text);
        assert_eq!(r.error_code(), Some(-32600), "{origin}");
        assert_eq!(r.body["error"]["message"], "Origin not allowed", "{origin}");
    }
    // A page served from this machine (a local dev UI) may call, whatever Host it used.
    let r = env
        .raw(
            &list_headers(&[("Origin", "http://localhost:5173")]),
            list_body(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn a_wildcard_host_list_admits_no_origin() {
    let env = env_with(|c| c.mount.allowed_hosts = vec!["*".into()]).await;
    let r = env
        .raw(
            &list_headers(&[("Origin", "http://evil.example"), ("Host", "evil.example")]),
            list_body(),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(r.body["error"]["message"], "Origin not allowed");
    env.shutdown().await;
}

#[tokio::test]
async fn the_public_urls_origin_may_call_from_any_host() {
    let env = env_with(|c| c.mount.public_url = Some("https://wop.example.com".into())).await;
    let r = env
        .raw(
            &list_headers(&[
                ("Origin", "https://wop.example.com"),
                ("Host", SERVICE_HOST),
            ]),
            list_body(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn an_enforced_host_list_refuses_other_hosts_naming_the_host() {
    let env = env_with(|c| {
        c.mount.enforce_host = true;
        c.mount.allowed_hosts = vec![
            "localhost".into(),
            "127.0.0.1".into(),
            "mcp.internal".into(),
        ];
        c.mount.public_url = Some("https://wop.example.com".into());
    })
    .await;
    let r = env
        .raw(&list_headers(&[("Host", SERVICE_HOST)]), list_body())
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(r.error_code(), Some(-32600));
    assert_eq!(r.body["error"]["message"], "Host not allowed");
    for host in ["mcp.internal:8080", "wop.example.com", "127.0.0.1"] {
        let r = env.raw(&list_headers(&[("Host", host)]), list_body()).await;
        assert_eq!(r.status, 200, "{host}: {}", r.text);
    }
    env.shutdown().await;
}

async fn discovery_doc(env: &Env, host: Option<&str>) -> (String, Value) {
    let mut rb = env
        .http
        .get(format!("{}/.well-known/openwop", env.url))
        .header("OpenWOP-Version", "2.0");
    if let Some(h) = host {
        rb = rb.header("Host", h);
    }
    let r = rb.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    (
        etag,
        serde_json::from_str(&r.text().await.unwrap()).unwrap(),
    )
}

#[tokio::test]
async fn a_served_foreign_host_never_reaches_the_advertised_urls_nor_the_next_callers_document() {
    // With the wildcard every Host is served and was, before, copied into serverUrls.
    let env = env_with(|c| c.mount.allowed_hosts = vec!["*".into(), "127.0.0.1".into()]).await;
    let (clean_etag, clean) = discovery_doc(&env, None).await;
    assert_eq!(
        clean["mcp"]["serverUrls"],
        json!([env.mcp_url()]),
        "a named Host"
    );
    let (evil_etag, evil) = discovery_doc(&env, Some("evil.example:8080")).await;
    assert!(
        !evil.to_string().contains("evil.example"),
        "foreign Host in the document: {evil}"
    );
    assert_eq!(evil["mcp"]["serverUrls"], json!(["/mcp"]));
    // The next caller gets the same document and validator as before the foreign request.
    let (again_etag, again) = discovery_doc(&env, None).await;
    assert_eq!((again_etag.as_str(), &again), (clean_etag.as_str(), &clean));
    assert_ne!(evil_etag, clean_etag);
    env.shutdown().await;

    // With a public URL it is the only URL advertised, whatever the Host.
    let env = env_with(|c| c.mount.public_url = Some("https://wop.example.com".into())).await;
    let (_, doc) = discovery_doc(&env, Some(SERVICE_HOST)).await;
    assert_eq!(
        doc["mcp"]["serverUrls"],
        json!(["https://wop.example.com/mcp"])
    );
    env.shutdown().await;
}

#[tokio::test]
async fn url_mode_elicitations_never_point_at_a_foreign_host() {
    let env = env_with(|c| c.mount.allowed_hosts = vec!["*".into()]).await;
    let tool = "conformance-clarification-sensitive";
    let body = body_of(
        3,
        "tools/call",
        json!({"name": tool, "arguments": {}}),
        json!({"elicitation": {"url": {}}}),
    );
    let r = env
        .raw(
            &[
                ("MCP-Protocol-Version", V.to_string()),
                ("Mcp-Method", "tools/call".to_string()),
                ("Mcp-Name", tool.to_string()),
                ("Authorization", format!("Bearer {A}")),
                ("Host", "evil.example:8080".to_string()),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let reqs = r.result()["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("a URL-mode request: {}", r.text));
    assert!(!reqs.is_empty());
    for v in reqs.values() {
        assert_eq!(v["params"]["mode"], "url", "{}", r.text);
        let url = v["params"]["url"].as_str().unwrap();
        assert!(
            url.starts_with("/runs/"),
            "relative, not on the caller's Host: {url}"
        );
    }
    assert!(!r.text.contains("evil.example"), "{}", r.text);
    env.shutdown().await;
}
