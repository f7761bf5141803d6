//! The version header, the credential probe, error
//! codes that are numbers, the readiness route and its credential, and the augmentation of
//! `/.well-known/openwop` are settings (src/config/wire.rs), proven against the devhost's
//! flavours that are not OpenWOP (their wire is in devhost/src/lib.rs, the crate docs).

use serde_json::{json, Value};

use crate::support::*;
use openwop_devhost::Flavor;

async fn readyz(env: &Env) -> (u16, String) {
    let r = env
        .http
        .get(format!("{}/readyz", env.url))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// An AIP-151 job type catalog (as in tests/it/catalog.rs), one page.
const AIP151_CATALOG: &str = r#"
  routes:
    listTools: { path: "/v1/projects/acme/jobTypes?pageSize=100" }
tools:
  source: toolCatalog
  catalog:
    items: /jobTypes
    name: /name
    nameLastSegment: true
    inputSchema: /parameters
"#;

#[tokio::test]
async fn with_version_header_none_no_openwop_version_reaches_the_host() {
    let yaml = format!(
        "host:\n  versionHeader: none\n  readiness: {{ path: /v1/operations }}\n{AIP151_CATALOG}"
    );
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(!r.result()["tools"].as_array().unwrap().is_empty());
    let _ = readyz(&env).await;
    let reqs = env.host.requests();
    assert!(reqs.len() >= 2, "{reqs:?}");
    for q in &reqs {
        assert_eq!(q.header("openwop-version"), None, "{} {}", q.method, q.path);
    }
    env.shutdown().await;

    // Another name and value: sent on every call instead.
    let yaml = format!(
        "host:\n  versionHeader: {{ name: X-Api-Version, value: '2026-01-01' }}\n{AIP151_CATALOG}"
    );
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let reqs = env.host.requests();
    assert!(!reqs.is_empty());
    for q in &reqs {
        assert_eq!(q.header("x-api-version"), Some("2026-01-01"), "{}", q.path);
        assert_eq!(q.header("openwop-version"), None, "{}", q.path);
    }
    env.shutdown().await;
}

const STATIC_TOOL: &str = "tools:\n  source: static\n  static: [{ name: greet }]\n";

#[tokio::test]
async fn probe_none_sends_nothing_and_a_probe_route_is_sent_as_configured() {
    // The default probe (`?limit=1`) at an AIP-151 list: the strict host refuses the parameter.
    let yaml = format!("host:\n  probe: {{ path: /v1/operations }}\n{STATIC_TOOL}");
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.error_code(), Some(-32602), "{}", r.text);
    let reqs = env.host.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].query.as_deref(), Some("limit=1"));
    env.shutdown().await;

    // Its own query instead: accepted, and the static catalog is served.
    let yaml = format!(
        "host:\n  probe: {{ path: /v1/operations, query: {{ pageSize: '1' }} }}\n{STATIC_TOOL}"
    );
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.result()["tools"][0]["name"], "greet");
    let reqs = env.host.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(
        (reqs[0].path.as_str(), reqs[0].query.as_deref()),
        ("/v1/operations", Some("pageSize=1"))
    );
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {A}").as_str()),
        "the probe carries the caller's credential"
    );
    // A credential the host refuses is refused at tools/list.
    let r = env
        .rpc(Some("not-a-key"), "tools/list", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 401, "{}", r.text);
    env.shutdown().await;

    // `none`: no probe at all; the catalog is listed without a host call, and server/discover
    // too. The host first judges the credential when a call reaches it.
    let yaml = format!("host:\n  probe: none\n{STATIC_TOOL}");
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.result()["tools"][0]["name"], "greet");
    let r = env
        .rpc(Some("not-a-key"), "server/discover", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let reqs = env.host.requests();
    assert!(reqs.is_empty(), "no request reached the host: {reqs:?}");
    env.shutdown().await;
}

#[tokio::test]
async fn an_error_rule_with_a_numeric_code_classifies_an_aip151_error() {
    // The host's 400 (`{error: {code: 400, status: "INVALID_ARGUMENT", message}}`) for the
    // probe's unknown `limit` parameter: by default a refusal with the host's message
    // (-32602); a rule on the number at /error/code makes it a host fault (-32603).
    let base = "host:\n  probe: { path: /v1/operations }\n  fields: { errorCode: /error/status, errorMessage: /error/message }\n";
    let env = env_with_yaml(Flavor::Aip151, &format!("{base}{STATIC_TOOL}"), |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.error_code(), Some(-32602), "{}", r.text);
    assert!(
        r.text.contains("Unknown name"),
        "the host's message: {}",
        r.text
    );
    env.shutdown().await;

    for rule in [
        "{ status: 400, codeAt: /error/code, code: 400, as: internal }",
        "{ status: 4xx, code: INVALID_ARGUMENT, as: internal }",
    ] {
        let yaml = format!("{base}  errors:\n    - {rule}\n{STATIC_TOOL}");
        let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
        let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
        assert_eq!(r.error_code(), Some(-32603), "{rule}: {}", r.text);
        assert!(
            !r.text.contains("Unknown name"),
            "nothing leaks: {}",
            r.text
        );
        env.shutdown().await;
    }
    // A number is not its text: `"400"` does not match the number 400.
    let yaml = format!(
        "{base}  errors:\n    - {{ status: 400, codeAt: /error/code, code: '400', as: internal }}\n{STATIC_TOOL}"
    );
    let env = env_with_yaml(Flavor::Aip151, &yaml, |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.error_code(), Some(-32602), "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn readiness_asks_the_configured_route_with_the_operators_credential() {
    // The default, discovery: an AIP-151 host has none, so the sidecar is never ready.
    let env = env_with_yaml(Flavor::Aip151, "", |_| {}).await;
    let (s, text) = readyz(&env).await;
    assert_eq!(s, 503, "{text}");
    env.shutdown().await;

    // A route that needs a credential, without one: not ready.
    let env = env_with_yaml(
        Flavor::Aip151,
        "host:\n  readiness: { path: '/v1/operations?pageSize=1' }\n",
        |_| {},
    )
    .await;
    let (s, text) = readyz(&env).await;
    assert_eq!(s, 503, "{text}");
    assert!(text.contains("GET /v1/operations?pageSize=1"), "{text}");
    env.shutdown().await;

    // With the operator's credential from the environment (the real binary, whose
    // environment it is): ready, the credential is the readiness probe's only, and the log
    // never shows it.
    let host = devhost_of(Flavor::Aip151).await;
    let (dir, file) = config_dir(
        "readiness",
        "shutdown:\n  lameDuckMs: 0\nhost:\n  readiness: { path: '/v1/operations?pageSize=1', credentialEnv: OWSC_READINESS_TOKEN }\n",
    );
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_openwop-mcp-sidecar"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &host.base_url(),
        ])
        .arg("--config")
        .arg(&file)
        .env("OWSC_READINESS_TOKEN", A)
        .env("RUST_LOG", "debug")
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (base, _stdout) = listening_base(&mut child).await;
    let r = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{base}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let probe = host.requests().last().cloned().unwrap();
    assert_eq!(
        (probe.method.as_str(), probe.path.as_str()),
        ("GET", "/v1/operations")
    );
    assert_eq!(
        probe.header("authorization"),
        Some(format!("Bearer {A}").as_str())
    );
    child.kill().await.unwrap();
    let mut log = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut tokio::io::BufReader::new(stderr), &mut log)
        .await
        .unwrap();
    assert!(
        log.contains("listening") || !log.is_empty(),
        "the log was read"
    );
    assert!(
        !log.contains(A),
        "the readiness credential is never logged: {log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    host.shutdown().await;

    // Azure: the credential from a file, read at each probe (a rotated secret needs no reload).
    let dir = std::env::temp_dir().join(format!("owsc-readiness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, format!("{A}\n")).unwrap();
    let yaml = format!(
        "host:\n  versionHeader: none\n  readiness:\n    path: '/jobTypes?api-version=2026-01-01&maxpagesize=1'\n    credentialFile: '{}'\n",
        token.display()
    );
    let env = env_with_yaml(Flavor::Azure, &yaml, |_| {}).await;
    let (s, text) = readyz(&env).await;
    assert_eq!(s, 200, "{text}");
    std::fs::write(&token, "revoked-key").unwrap();
    let (s, text) = readyz(&env).await;
    assert_eq!(s, 503, "{text}");
    assert!(!text.contains("revoked-key"), "{text}");
    let last = env.host.requests().last().cloned().unwrap();
    assert_eq!(last.header("authorization"), Some("Bearer revoked-key"));
    env.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn with_augmentation_off_the_hosts_discovery_document_passes_untouched() {
    if legacy() {
        return;
    }
    let env = env_with_yaml(Flavor::V2, "host:\n  augmentDiscovery: false\n", |_| {}).await;
    let direct = env
        .http
        .get(format!("{}/.well-known/openwop", env.host.base_url()))
        .send()
        .await
        .unwrap();
    let direct_etag = direct.headers().get("etag").cloned();
    let direct_body = direct.bytes().await.unwrap();
    let through = env
        .http
        .get(format!("{}/.well-known/openwop", env.url))
        .send()
        .await
        .unwrap();
    assert_eq!(through.status(), 200);
    assert_eq!(through.headers().get("etag").cloned(), direct_etag);
    let body = through.bytes().await.unwrap();
    assert_eq!(body, direct_body, "the host's bytes");
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert!(doc.get("mcp").is_none(), "{doc}");
    // The mount is still found by MCP's own means.
    let r = env
        .rpc(Some(A), "server/discover", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    env.shutdown().await;

    // On (the default): the `mcp` family advertises the mount.
    let env = env_with_yaml(Flavor::V2, "", |_| {}).await;
    let doc: Value = env
        .http
        .get(format!("{}/.well-known/openwop", env.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["mcp"]["serverUrls"].is_array(), "{doc}");
    env.shutdown().await;
}

/// A run waiting on an interrupt the client cannot answer: the answer names the host's
/// resolveInterrupt route as configured (method and path, ids in the host's encoding), never a
/// fixed OpenWOP path.
#[tokio::test]
async fn a_pending_answer_names_the_configured_resolve_route() {
    if legacy() {
        return;
    }
    let yaml = "host:\n  routes:\n    resolveInterrupt: { method: PUT, path: '/runs/{runId}/decisions/{nodeId}' }\ntools:\n  source: toolCatalog\n";
    let env = env_with_yaml(Flavor::V2, yaml, |_| {}).await;
    let r = env
        .call(A, "conformance-approval", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body: Value =
        serde_json::from_str(r.result()["content"][0]["text"].as_str().unwrap()).unwrap();
    let run = body["runId"].as_str().unwrap();
    let message = body["message"].as_str().unwrap();
    let wire = run.replace('/', "~2F");
    assert!(
        message.contains(&format!(
            "resolveInterrupt route, PUT /runs/{wire}/decisions/"
        )),
        "{message}"
    );
    assert!(!message.contains("/interrupts/"), "{message}");
    env.shutdown().await;
}
