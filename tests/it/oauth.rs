//! MCP clients that log in by themselves. The sidecar serves RFC 9728
//! protected-resource metadata and points every 401 (and 403 insufficient_scope) on the mount
//! at it, while the host stays the authority on tokens.

use openwop_mcp_sidecar::config::auth::{Auth, HostMetadata};
use serde_json::{json, Value};

use crate::support::*;

fn auth_on(issuer: &str) -> Auth {
    Auth {
        authorization_servers: vec![issuer.to_string()],
        scopes: vec!["runs:read".into(), "runs:create".into()],
        resource: None,
        resource_documentation: None,
        host_metadata: HostMetadata::Ignore,
        require_token: true,
        metadata_max_age_seconds: 3600,
    }
}

async fn get(
    env: &Env,
    path: &str,
    host: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut rb = env.http.get(format!("{}{path}", env.url));
    if let Some(h) = host {
        rb = rb.header("Host", h);
    }
    let r = rb.send().await.unwrap();
    let s = r.status().as_u16();
    let h = r.headers().clone();
    (s, h, r.text().await.unwrap())
}

fn challenge(r: &Rpc) -> String {
    r.headers
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

fn prm_url(env: &Env) -> String {
    format!("{}/.well-known/oauth-protected-resource/mcp", env.url)
}

#[tokio::test]
async fn protected_resource_metadata_names_the_mount_url_and_the_authorization_server() {
    let env = env_with(|c| {
        let mut a = auth_on("https://login.example.com/realms/openwop");
        a.resource_documentation = Some("https://docs.example.com/mcp".into());
        c.auth = Some(a);
    })
    .await;
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let (s, h, body) = get(&env, path, None).await;
        assert_eq!(s, 200, "{path}: {body}");
        assert_eq!(h["content-type"], "application/json");
        assert_eq!(h["cache-control"], "public, max-age=3600");
        let doc: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            doc,
            json!({
                "resource": env.mcp_url(),
                "authorization_servers": ["https://login.example.com/realms/openwop"],
                "scopes_supported": ["runs:read", "runs:create"],
                "bearer_methods_supported": ["header"],
                "resource_documentation": "https://docs.example.com/mcp",
            }),
            "{path}"
        );
    }
    env.shutdown().await;
}

#[tokio::test]
async fn metadata_resource_comes_from_public_url_never_from_an_unlisted_host() {
    let env = env_with(|c| c.auth = Some(auth_on("https://id.example.com"))).await;
    // A Host that is not listed by name gets no document, rather than one naming that Host.
    let (s, _, body) = get(
        &env,
        "/.well-known/oauth-protected-resource/mcp",
        Some("evil.example"),
    )
    .await;
    assert_eq!(s, 404, "{body}");
    assert!(!body.contains("evil.example"), "{body}");
    env.shutdown().await;

    let env = env_with(|c| {
        c.mount.public_url = Some("https://mcp.example.com".into());
        c.auth = Some(auth_on("https://id.example.com"));
    })
    .await;
    let (s, _, body) = get(
        &env,
        "/.well-known/oauth-protected-resource/mcp",
        Some("evil.example"),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["resource"], "https://mcp.example.com/mcp");
    let r = env
        .rpc(Some("not-a-key"), "tools/list", json!({}), json!({}))
        .await;
    assert!(
        challenge(&r).contains(r#"resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp""#),
        "{}",
        challenge(&r)
    );
    env.shutdown().await;
}

/// `mount.publicUrl` written as the origin or as the whole mount URL (what README's deploy
/// checklist shows) is the same mount, advertised once: `…/mcp`, never `…/mcp/mcp`, in
/// discovery, in the RFC 9728 `resource` and in the 401's `resource_metadata`.
#[tokio::test]
async fn public_url_as_origin_or_mount_url_advertises_the_mount_url_once() {
    for written in [
        "https://mcp.example.com",
        "https://mcp.example.com/",
        "https://mcp.example.com/mcp",
        "https://mcp.example.com/mcp/",
    ] {
        let yaml = format!("mount:\n  publicUrl: {written}\n");
        let parsed = openwop_mcp_sidecar::config::Config::from_yaml_str(
            &yaml,
            "sidecar.yaml",
            &Default::default(),
        )
        .unwrap();
        let env = env_with(|c| {
            c.mount = parsed.mount;
            c.auth = Some(auth_on("https://id.example.com"));
        })
        .await;
        let (s, _, body) = get(&env, "/.well-known/openwop", None).await;
        assert_eq!(s, 200, "{body}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            doc["mcp"]["serverUrls"],
            json!(["https://mcp.example.com/mcp"]),
            "{written}"
        );
        let (s, _, body) = get(&env, "/.well-known/oauth-protected-resource/mcp", None).await;
        assert_eq!(s, 200, "{written}: {body}");
        let prm: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(prm["resource"], "https://mcp.example.com/mcp", "{written}");
        let r = env
            .rpc(Some("not-a-key"), "tools/list", json!({}), json!({}))
            .await;
        assert_eq!(r.status, 401);
        assert!(
            challenge(&r).contains(r#"resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp""#),
            "{written}: {}",
            challenge(&r)
        );
        env.shutdown().await;
    }
}

#[tokio::test]
async fn metadata_paths_pass_through_to_the_host_when_auth_is_off() {
    let env = env().await;
    let (s, _, body) = get(&env, "/.well-known/oauth-protected-resource/mcp", None).await;
    assert_eq!(s, 404, "{body}");
    assert!(body.contains("no route"), "the host's own answer: {body}");
    let r = env
        .rpc(Some("not-a-key"), "tools/list", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 401);
    assert!(
        !challenge(&r).contains("resource_metadata"),
        "{}",
        challenge(&r)
    );
    env.shutdown().await;
}

#[tokio::test]
async fn a_host_401_on_the_mount_gains_resource_metadata_and_keeps_realm_and_error() {
    let env = env_with(|c| c.auth = Some(auth_on("https://id.example.com"))).await;
    let r = env
        .rpc(Some("not-a-key"), "tools/list", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 401, "{}", r.text);
    let parsed = openwop_mcp_sidecar::auth::parse(&challenge(&r));
    assert_eq!(parsed.len(), 1, "{}", challenge(&r));
    let c = &parsed[0];
    assert_eq!(c.scheme, "Bearer");
    assert_eq!(c.param("resource_metadata"), Some(prm_url(&env).as_str()));
    assert_eq!(c.param("realm"), Some("openwop-devhost"));
    assert_eq!(c.param("error"), Some("invalid_token"));
    // The host named no scope: the advertised ones are suggested (MCP "Authorization").
    assert_eq!(c.param("scope"), Some("runs:read runs:create"));
    assert_eq!(r.body["error"]["code"], -32600);
    env.shutdown().await;
}

#[tokio::test]
async fn a_request_without_a_token_gets_the_challenge_from_the_sidecar_before_any_host_call() {
    let env = env_with(|c| c.auth = Some(auth_on("https://id.example.com"))).await;
    env.host.clear_requests();
    let r = env.rpc(None, "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 401, "{}", r.text);
    assert_eq!(
        challenge(&r),
        format!(
            r#"Bearer resource_metadata="{}", scope="runs:read runs:create""#,
            prm_url(&env)
        )
    );
    assert!(env.host.requests().is_empty(), "the host was not asked");
    let metrics = env.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("outcome=\"unauthorized\"") && !l.starts_with('#')),
        "the refusal is counted"
    );

    // The Host/Origin check comes first: a foreign Origin is refused as such, not challenged.
    let r = env
        .raw(
            &[
                ("MCP-Protocol-Version", V.to_string()),
                ("Mcp-Method", "tools/list".to_string()),
                ("Origin", "https://evil.example".to_string()),
            ],
            body_of(1, "tools/list", json!({}), json!({})).to_string(),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.headers.get("www-authenticate").is_none());
    env.shutdown().await;

    // requireToken: false leaves the decision to the host (anonymous-caller hosts).
    let env = env_with_host(
        |h| h.anonymous = true,
        |c| {
            let mut a = auth_on("https://id.example.com");
            a.require_token = false;
            c.auth = Some(a);
        },
    )
    .await;
    let r = env.rpc(None, "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn a_403_insufficient_scope_keeps_its_scope_and_gains_resource_metadata() {
    let env = env_with(|c| c.auth = Some(auth_on("https://id.example.com"))).await;
    let r = env
        .call(READONLY, "conformance-noop", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    let parsed = openwop_mcp_sidecar::auth::parse(&challenge(&r));
    let c = parsed
        .iter()
        .find(|c| c.scheme == "Bearer")
        .expect("a Bearer challenge");
    assert_eq!(c.param("error"), Some("insufficient_scope"));
    assert_eq!(c.param("scope"), Some("runs:create"));
    assert_eq!(c.param("resource_metadata"), Some(prm_url(&env).as_str()));
    env.shutdown().await;
}

#[tokio::test]
async fn passthrough_rest_answers_are_left_exactly_as_the_host_sent_them() {
    let env = env_with(|c| c.auth = Some(auth_on("https://id.example.com"))).await;
    let r = env
        .http
        .get(format!("{}{}", env.url, rest_path("/runs")))
        .header("Authorization", "Bearer not-a-key")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let direct = env
        .http
        .get(format!("{}{}", env.host.base_url(), rest_path("/runs")))
        .header("Authorization", "Bearer not-a-key")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["www-authenticate"],
        direct.headers()["www-authenticate"]
    );
    assert!(!r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .contains("resource_metadata"));
    // No token at all: REST is the host's business, not the sidecar's refusal.
    let r = env
        .http
        .get(format!("{}{}", env.url, rest_path("/runs")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(!r.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .contains("resource_metadata"));
    env.shutdown().await;
}

#[tokio::test]
async fn the_auth_section_hot_reloads_on() {
    let fe = env_with_file("reload:\n  pollIntervalMs: 60000\n").await;
    let env = &fe.env;
    let (s, _, _) = get(env, "/.well-known/oauth-protected-resource/mcp", None).await;
    assert_eq!(s, 404, "off: the host answers");
    std::fs::write(
        &fe.path,
        "reload:\n  pollIntervalMs: 60000\nauth:\n  authorizationServers: [https://id.example.com]\n  scopes: [runs:read]\n",
    )
    .unwrap();
    let server = env.server.as_ref().unwrap();
    assert_eq!(
        server.reload(),
        openwop_mcp_sidecar::server::Reload::Applied
    );
    let (s, _, body) = get(env, "/.well-known/oauth-protected-resource/mcp", None).await;
    assert_eq!(s, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        doc["authorization_servers"],
        json!(["https://id.example.com"])
    );
    let r = env.rpc(None, "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 401);
    // A broken edit of the section is refused with its location; the last good one serves.
    std::fs::write(
        &fe.path,
        "auth:\n  authorizationServers: [https://id.example.com]\n  hostMetadata: sometimes\n",
    )
    .unwrap();
    match server.reload() {
        openwop_mcp_sidecar::server::Reload::Refused(m) => {
            assert!(m.contains(":3:") && m.contains("auth.hostMetadata"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    let (s, _, _) = get(env, "/.well-known/oauth-protected-resource/mcp", None).await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn host_metadata_pass_through_falls_back_to_the_sidecars_document() {
    let env = env_with(|c| {
        let mut a = auth_on("https://id.example.com");
        a.host_metadata = HostMetadata::PassThrough;
        c.auth = Some(a);
    })
    .await;
    // The devhost serves no protected-resource metadata of its own.
    let (s, _, body) = get(&env, "/.well-known/oauth-protected-resource/mcp", None).await;
    assert_eq!(s, 200, "{body}");
    assert!(env
        .host
        .requests()
        .iter()
        .any(|r| r.path == "/.well-known/oauth-protected-resource/mcp"));
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(doc["resource"], env.mcp_url());
    env.shutdown().await;
}

/// What an MCP client's OAuth helper does, step by step, from the mount's 401 to a token:
/// the challenge's `resource_metadata`, the metadata's authorization server, its RFC 8414
/// metadata, registration (RFC 7591), authorization code with PKCE S256 and `resource`
/// (approved for `user` through the demo's login hint), and the token request.
async fn log_in(env: &Env, user: &str) -> String {
    log_in_for(env, user, None).await
}

/// [`log_in`], asking for a token bound to `resource` instead of the advertised one.
async fn log_in_for(env: &Env, user: &str, other_resource: Option<&str>) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let r = env.rpc(None, "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 401);
    let c = openwop_mcp_sidecar::auth::parse(&challenge(&r)).remove(0);
    let prm: Value = env
        .http
        .get(c.param("resource_metadata").unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(prm["resource"], env.mcp_url());
    let resource = other_resource
        .unwrap_or(prm["resource"].as_str().unwrap())
        .to_string();
    let issuer = prm["authorization_servers"][0].as_str().unwrap();
    let asm: Value = env
        .http
        .get(format!("{issuer}/.well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(asm["issuer"], issuer);
    assert_eq!(asm["code_challenge_methods_supported"], json!(["S256"]));
    let reg: Value = env
        .http
        .post(asm["registration_endpoint"].as_str().unwrap())
        .json(&json!({"redirect_uris": ["http://127.0.0.1:1/callback"], "client_name": "it"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = reg["client_id"].as_str().unwrap().to_string();
    let verifier = format!("v{}", "x".repeat(60));
    let challenge_b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    let no_redirects = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = no_redirects
        .get(asm["authorization_endpoint"].as_str().unwrap())
        .query(&[
            ("response_type", "code"),
            ("client_id", &client_id),
            ("redirect_uri", "http://127.0.0.1:1/callback"),
            ("code_challenge", &challenge_b64),
            ("code_challenge_method", "S256"),
            ("state", "st"),
            ("resource", &resource),
            ("login_hint", user),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 302);
    let loc = reqwest::Url::parse(resp.headers()["location"].to_str().unwrap()).unwrap();
    let code = loc
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.to_string())
        .expect("a code");
    let tok: Value = env
        .http
        .post(asm["token_endpoint"].as_str().unwrap())
        .form(&[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &code),
            ("code_verifier", &verifier),
            ("redirect_uri", "http://127.0.0.1:1/callback"),
            ("resource", &resource),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    tok["access_token"]
        .as_str()
        .expect("an access token")
        .to_string()
}

fn demo_auth(env_host: &str) -> Auth {
    let mut a = auth_on(env_host);
    a.scopes = openwop_devhost::oauth::SCOPES
        .iter()
        .map(|s| s.to_string())
        .collect();
    a
}

/// The sidecar in front of the devhost, whose demo authorization server is the advertised
/// issuer (as `openwop-mcp-sidecar demo` runs it).
async fn demo_env() -> Env {
    let env = env_with(|c| {
        let issuer = c.upstream.url.clone();
        c.auth = Some(demo_auth(&issuer));
    })
    .await;
    env.host.set_oauth_audiences(vec![env.mcp_url()]);
    env
}

#[tokio::test]
async fn a_token_from_the_demo_authorization_server_drives_runs_as_the_user_who_approved() {
    let env = demo_env().await;
    let alice = log_in(&env, "alice").await;
    let r = env
        .call(&alice, "conformance-noop", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_ne!(r.result()["isError"], true, "{}", r.text);
    let snap = env.run(A, &run_id_of(r.result())).await;
    assert_eq!(snap["owner"]["tenant"], "acme", "{snap}");
    assert_eq!(
        snap["owner"]["subject"]["subjectId"], "urn:devhost:acme:alice",
        "{snap}"
    );
    assert_eq!(snap["owner"]["subject"]["lane"], "oauth", "{snap}");
    // The same call with a token the authorization server never issued is the host's 401.
    let r = env
        .call("owat_forged", "conformance-noop", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 401);
    env.shutdown().await;
}

#[tokio::test]
async fn an_oauth_token_for_tenant_a_never_reads_tenant_b_tasks() {
    let env = demo_env().await;
    let alice = log_in(&env, "alice").await;
    let bob = log_in(&env, "bob").await;
    let r = env
        .call(&alice, "conformance-approval", json!({}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let own = env
        .rpc(
            Some(&alice),
            "tasks/get",
            json!({"taskId": task}),
            task_caps(),
        )
        .await;
    assert_eq!(own.result()["status"], "input_required", "{}", own.text);
    for method in ["tasks/get", "tasks/cancel"] {
        let r = env
            .rpc(Some(&bob), method, json!({"taskId": task}), task_caps())
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(
            r.body["error"]["message"], "task not found",
            "{method}: {}",
            r.text
        );
    }
    let still = env
        .rpc(
            Some(&alice),
            "tasks/get",
            json!({"taskId": task}),
            task_caps(),
        )
        .await;
    assert_eq!(still.result()["status"], "input_required", "{}", still.text);
    env.shutdown().await;
}

#[tokio::test]
async fn a_token_issued_for_another_resource_is_refused_by_the_host_with_the_challenge() {
    let env = demo_env().await;
    let stolen = log_in_for(&env, "alice", Some("https://other-mcp.example.com/mcp")).await;
    let r = env
        .call(&stolen, "conformance-noop", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 401, "{}", r.text);
    let c = openwop_mcp_sidecar::auth::parse(&challenge(&r)).remove(0);
    assert_eq!(c.param("error"), Some("invalid_token"));
    assert_eq!(c.param("resource_metadata"), Some(prm_url(&env).as_str()));
    env.shutdown().await;
}

#[tokio::test]
async fn host_metadata_pass_through_relays_the_hosts_own_document_when_it_serves_one() {
    // The "host" here is another sidecar (in front of the devhost) that serves metadata of its own.
    let inner = env_with(|c| {
        c.mount.public_url = Some("https://inner.example.com".into());
        c.auth = Some(auth_on("https://inner-login.example.com"));
    })
    .await;
    let overrides = openwop_mcp_sidecar::config::Overrides {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(inner.url.clone()),
    };
    let mut cfg =
        openwop_mcp_sidecar::config::Config::from_yaml_str("{}", "<test>", &overrides).unwrap();
    let mut a = auth_on("https://outer-login.example.com");
    a.host_metadata = HostMetadata::PassThrough;
    cfg.auth = Some(a);
    let outer = openwop_mcp_sidecar::server::Server::start(cfg)
        .await
        .unwrap();
    let r = inner
        .http
        .get(format!(
            "http://{}/.well-known/oauth-protected-resource/mcp",
            outer.addr
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let doc: Value = r.json().await.unwrap();
    assert_eq!(
        doc["authorization_servers"],
        json!(["https://inner-login.example.com"])
    );
    assert_eq!(doc["resource"], "https://inner.example.com/mcp");
    outer.shutdown().await;
    inner.shutdown().await;
}

#[tokio::test]
async fn check_config_refuses_a_bad_auth_section_naming_file_line_and_column() {
    let dir = std::env::temp_dir().join(format!("owsc-oauth-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sidecar.yaml");
    std::fs::write(
        &path,
        "mount:\n  path: /mcp\nauth:\n  authorizationServers:\n    - http://login.example.com\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_openwop-mcp-sidecar"))
        .arg("check-config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:5:5:", path.display()))
            && err.contains("auth.authorizationServers")
            && err.contains("https://"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
