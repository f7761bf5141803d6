// Over 700 lines: one test per guarantee of the v2 REST surface, sharing local helpers.
//! The REST surface guarantees of OpenWOP v2 api/v2/openapi.yaml; OpenWOP v2 identity.md that are not about one
//! fixture: discovery, auth, ids, tenant isolation, idempotency, listing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod common;

use std::time::Duration;

use common::*;
use openwop_devhost::{wire_id, DevHostConfig};
use serde_json::{json, Value};

const SOON: Duration = Duration::from_secs(5);

#[tokio::test]
async fn discovery_is_unauthenticated_v2_root_without_mcp_family() {
    let h = H::new().await;
    let r = h.send(h.http.get(h.url("/.well-known/openwop"))).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("openwop-version"), Some("2.0"));
    assert_eq!(r.header("cache-control"), Some("public, max-age=300"));
    let d = &r.body;
    assert_eq!(d["protocolVersions"], json!(["2.0"]));
    assert_eq!(d["preferredVersion"], "2.0");
    let fixtures: Vec<&str> = d["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for f in [
        "conformance-approval",
        "conformance-approval-approvers",
        "conformance-failure",
        "conformance-delay",
        "conformance-cancellable",
        "conformance-noop",
        "conformance-clarification",
        "conformance-clarification-nested",
        "conformance-clarification-sensitive",
    ] {
        assert!(fixtures.contains(&f), "{f}");
    }
    assert_eq!(d["runList"]["maxPageSize"], 100);
    assert_eq!(d["runList"]["filters"], json!(["workflowId", "status"]));
    assert_eq!(d["runList"]["since"], "2.0");
    assert!(d["runList"]["status"].is_string() && d["runList"]["witness"].is_string());
    assert_eq!(d["interrupt"]["tokenAlgs"], json!(["hs256"]));
    assert_eq!(d["interrupt"]["refKinds"], json!(["principal"]));
    assert!(d["toolCatalog"].is_object());
    assert!(d.get("mcp").is_none());
    assert!(d.get("anonymousActor").is_none());
}

#[tokio::test]
async fn discovery_etag_is_strong_stable_and_answers_304() {
    let h = H::new().await;
    let a = h.send(h.http.get(h.url("/.well-known/openwop"))).await;
    let b = h.send(h.http.get(h.url("/.well-known/openwop"))).await;
    assert_eq!(a.raw, b.raw, "byte-identical bodies");
    let etag = a.header("etag").unwrap().to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong: {etag}"
    );
    assert_eq!(b.header("etag"), Some(etag.as_str()));
    let r = h
        .send(
            h.http
                .get(h.url("/.well-known/openwop"))
                .header("If-None-Match", &etag),
        )
        .await;
    assert_eq!(r.status, 304);
    assert!(r.raw.is_empty());
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert_eq!(r.header("openwop-version"), Some("2.0"));
    let r = h
        .send(
            h.http
                .get(h.url("/.well-known/openwop"))
                .header("If-None-Match", "\"other\""),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn anonymous_mode_advertises_anonymous_actor_and_serves_unauthenticated_callers() {
    let h = H::with(DevHostConfig {
        anonymous: true,
        ..DevHostConfig::default()
    })
    .await;
    let d = h.send(h.http.get(h.url("/.well-known/openwop"))).await.body;
    assert!(d["anonymousActor"].is_object());
    let r = h
        .send(
            h.http
                .post(h.url("/runs"))
                .json(&json!({"workflowId": "conformance-noop"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let run = r.body["runId"].as_str().unwrap().to_owned();
    assert!(run.starts_with("anon:public/r-"), "{run}");
    let snap = h
        .send(
            h.http
                .get(h.url(&format!("/runs/{}", wire_id::project(&run)))),
        )
        .await;
    assert_eq!(snap.status, 200, "{}", snap.body);
    assert_eq!(snap.body["owner"]["subject"]["kind"], "anonymous");
    assert_eq!(snap.body["owner"]["subject"]["lane"], "anonymous");
    // A bearer still authenticates normally, and cannot read the anonymous run.
    let r = h.run(ACME, &run).await;
    assert_eq!((r.status.as_u16(), r.error()), (403, "id_tenant_mismatch"));
    let r = h.get("wrong-key", "/runs").await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn missing_or_unknown_bearer_is_401_with_a_challenge() {
    let h = H::new().await;
    let r = h.send(h.http.get(h.url("/runs"))).await;
    assert_eq!((r.status.as_u16(), r.error()), (401, "unauthenticated"));
    let challenge = r.header("www-authenticate").unwrap();
    assert!(
        challenge.starts_with("Bearer realm=\"openwop-devhost\""),
        "{challenge}"
    );
    assert!(!challenge.contains("invalid_token"));
    assert_eq!(r.header("openwop-version"), Some("2.0"));
    assert!(!r.body["message"].as_str().unwrap().is_empty());

    let r = h.get("not-a-key", "/runs").await;
    assert_eq!(r.status, 401);
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("error=\"invalid_token\""));
}

#[tokio::test]
async fn readonly_key_is_refused_mutations_with_insufficient_scope() {
    let h = H::new().await;
    let r = h
        .post(READONLY, "/runs", json!({"workflowId": "conformance-noop"}))
        .await;
    assert_eq!((r.status.as_u16(), r.error()), (403, "forbidden"));
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer error=\"insufficient_scope\", scope=\"runs:create\"")
    );
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(READONLY, &run, &["waiting-approval"], SOON)
        .await;
    let r = h.cancel(READONLY, &run, json!({})).await;
    assert_eq!(r.status, 403);
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("scope=\"runs:cancel\""));
    let r = h
        .resolve(READONLY, &run, "gate", json!({"action": "accept"}))
        .await;
    assert_eq!(r.status, 403);
    assert!(r
        .header("www-authenticate")
        .unwrap()
        .contains("scope=\"approvals:respond\""));
    assert_eq!(h.get(READONLY, "/tools").await.status, 200);
}

#[tokio::test]
async fn error_bodies_are_exactly_the_envelope() {
    let h = H::new().await;
    for r in [
        h.get(ACME, "/workflows/nope").await,
        h.post(
            ACME,
            "/runs",
            json!({"workflowId": "conformance-noop", "bogus": 1}),
        )
        .await,
        h.get(ACME, "/runs/acme~2Fr-AAAAAAAAAAAAAAAAAAAAAAAA").await,
    ] {
        let obj = r.body.as_object().unwrap();
        assert!(obj
            .keys()
            .all(|k| ["error", "message", "details"].contains(&k.as_str())));
        assert!(!obj["message"].as_str().unwrap().is_empty());
        assert_eq!(r.header("openwop-version"), Some("2.0"));
    }
}

#[tokio::test]
async fn unlisted_protocol_version_is_406() {
    let h = H::new().await;
    let r = h
        .http
        .get(h.url("/runs"))
        .bearer_auth(ACME)
        .header("OpenWOP-Version", "9.9")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["openwop-version"], "2.0");
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 406, "{body}");
    assert_eq!(body["error"], "protocol_version_unsupported");
}

#[tokio::test]
async fn create_returns_tenant_bound_high_entropy_id_and_projected_urls() {
    let h = H::new().await;
    let r = h
        .post(ACME, "/runs", json!({"workflowId": "conformance-approval"}))
        .await;
    assert_eq!(r.status, 201);
    let run = r.body["runId"].as_str().unwrap();
    let (tenant, opaque) = run.split_once('/').unwrap();
    assert_eq!(tenant, "acme");
    let token = opaque.strip_prefix("r-").unwrap();
    assert_eq!(token.len(), 24);
    assert!(token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    assert!(
        ["pending", "running", "waiting-approval"].contains(&r.body["status"].as_str().unwrap())
    );
    let wire = wire_id::project(run);
    assert_eq!(r.body["eventsUrl"], format!("/runs/{wire}/events"));
    assert_eq!(r.body["statusUrl"], format!("/runs/{wire}"));
    // Readable right away through the returned URL.
    let snap = h.get(ACME, r.body["statusUrl"].as_str().unwrap()).await;
    assert_eq!(snap.status, 200);
    assert_eq!(snap.body["runId"], run);
    assert_eq!(snap.body["workflowId"], "conformance-approval");
    assert_eq!(snap.body["eventLogSchemaVersion"], 3);
    assert_eq!(
        snap.body["owner"],
        json!({"tenant": "acme", "subject": {
            "issuer": "urn:openwop-devhost:api-key",
            "subjectId": "urn:devhost:acme:alice",
            "tenant": "acme", "lane": "api-key", "kind": "user"}})
    );
}

#[tokio::test]
async fn create_body_is_closed_and_validated() {
    let h = H::new().await;
    let r = h
        .post(
            ACME,
            "/runs",
            json!({"workflowId": "conformance-noop", "transport": "mcp"}),
        )
        .await;
    assert_eq!((r.status.as_u16(), r.error()), (400, "validation_error"));
    assert_eq!(r.body["details"]["field"], "transport");
    let r = h.post(ACME, "/runs", json!({"inputs": {}})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["details"]["field"], "workflowId");
    let r = h
        .post(ACME, "/runs", json!({"workflowId": "no-such-workflow"}))
        .await;
    assert_eq!((r.status.as_u16(), r.error()), (404, "not_found"));
    let r = h
        .send(
            h.http
                .post(h.url("/runs"))
                .bearer_auth(ACME)
                .body("not json"),
        )
        .await;
    assert_eq!(r.status, 400);
    // Tags and metadata are persisted and echoed.
    let r = h
        .post(
            ACME,
            "/runs",
            json!({"workflowId": "conformance-noop", "tags": ["t1"], "metadata": {"k": "v"}}),
        )
        .await;
    assert_eq!(r.status, 201);
    let run = r.body["runId"].as_str().unwrap();
    let snap = h.run(ACME, run).await.body;
    assert_eq!(snap["tags"], json!(["t1"]));
    assert_eq!(snap["metadata"], json!({"k": "v"}));
    let started = &h.events(ACME, run).await[0];
    assert_eq!(started["payload"]["tags"], json!(["t1"]));
}

#[tokio::test]
async fn run_ids_work_in_tilde_percent_and_bare_forms() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    let opaque = run.split_once('/').unwrap().1;
    for path in [
        format!("/runs/{}", wire_id::project(&run)),
        format!("/runs/{}", pct(&run)),
        format!("/runs/acme%2f{opaque}"),
        format!("/runs/{opaque}"),
    ] {
        let r = h.get(ACME, &path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.body["runId"], run.as_str());
    }
    let r = h
        .get(
            ACME,
            &format!("/runs/{}/events/poll?timeout=1", wire_id::project(&run)),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn malformed_run_ids_are_400() {
    let h = H::new().await;
    for bad in [
        "acme~2",
        "acme~ZZr-AAAAAAAAAAAAAAAAAAAAAAAA",
        "acme~2Fshort",
        "acme~2Fr-AAAAAAAAAAAAAAAAAAAAAAAA~2Fx",
        "bad%20tenant~2Fr-AAAAAAAAAAAAAAAAAAAAAAAA",
        "short",
    ] {
        let r = h.get(ACME, &format!("/runs/{bad}")).await;
        assert_eq!(
            (r.status.as_u16(), r.error()),
            (400, "validation_error"),
            "{bad}"
        );
        assert!(r.header("www-authenticate").is_none());
    }
}

#[tokio::test]
async fn unknown_same_tenant_run_is_404() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    let fabricated = format!("acme~2F{}", "Z".repeat(run.len() - 5));
    let r = h.get(ACME, &format!("/runs/{fabricated}")).await;
    assert_eq!((r.status.as_u16(), r.error()), (404, "not_found"));
    assert!(r.header("www-authenticate").is_none());
}

#[tokio::test]
async fn foreign_tenant_ids_are_403_id_tenant_mismatch_whether_or_not_they_exist() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let r = h.run(GLOBEX, &run).await;
    assert_eq!((r.status.as_u16(), r.error()), (403, "id_tenant_mismatch"));
    let exists = r.body.clone();
    let r = h
        .get(GLOBEX, &format!("/runs/acme~2F{}", "Z".repeat(26)))
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.body, exists, "no existence disclosure");
    for r in [
        h.get(
            GLOBEX,
            &format!("/runs/{}/events/poll?timeout=1", pct(&run)),
        )
        .await,
        h.cancel(GLOBEX, &run, json!({})).await,
        h.resolve(GLOBEX, &run, "gate", json!({"action": "accept"}))
            .await,
    ] {
        assert_eq!((r.status.as_u16(), r.error()), (403, "id_tenant_mismatch"));
    }
    // Untouched by the foreign calls.
    assert_eq!(h.run(ACME, &run).await.body["status"], "waiting-approval");
    // A globex bare opaque resolves under globex, where it does not exist.
    let opaque = run.split_once('/').unwrap().1;
    let r = h.get(GLOBEX, &format!("/runs/{opaque}")).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn list_runs_shows_only_the_callers_tenant_newest_first() {
    let h = H::new().await;
    let a1 = h.create(ACME, "conformance-noop", json!({})).await;
    let g1 = h.create(GLOBEX, "conformance-noop", json!({})).await;
    let a2 = h.create(ACME, "conformance-failure", json!({})).await;
    let ids = |v: &Value| -> Vec<String> {
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["runId"].as_str().unwrap().to_owned())
            .collect()
    };
    let r = h.get(ACME, "/runs").await;
    assert_eq!(r.status, 200);
    assert_eq!(ids(&r.body), [a2.clone(), a1.clone()]);
    assert!(r.body.get("nextCursor").is_none());
    let r = h.get(GLOBEX, "/runs?limit=100").await;
    assert_eq!(ids(&r.body), [g1]);
    let r = h
        .get(ACME, "/runs?workflowId=conformance-noop&limit=100")
        .await;
    assert_eq!(ids(&r.body), std::slice::from_ref(&a1));
    h.wait_status(ACME, &a2, &["failed"], SOON).await;
    let r = h.get(ACME, "/runs?status=failed").await;
    assert_eq!(ids(&r.body), [a2]);
    let r = h.get(ACME, "/runs?status=bogus").await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn list_runs_pages_with_minted_cursors_only() {
    let h = H::new().await;
    let mut made = Vec::new();
    for _ in 0..5 {
        made.push(h.create(ACME, "conformance-noop", json!({})).await);
    }
    made.reverse();
    let mut seen = Vec::new();
    let mut path = "/runs?limit=2".to_owned();
    loop {
        let r = h.get(ACME, &path).await;
        assert_eq!(r.status, 200, "{}", r.body);
        for run in r.body["runs"].as_array().unwrap() {
            seen.push(run["runId"].as_str().unwrap().to_owned());
        }
        match r.body["nextCursor"].as_str() {
            Some(c) => path = format!("/runs?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, made);
    let r = h.get(ACME, "/runs?cursor=made-up-cursor").await;
    assert_eq!((r.status.as_u16(), r.error()), (400, "validation_error"));
    // limit is clamped, not refused.
    assert_eq!(
        h.get(ACME, "/runs?limit=0").await.body["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(h.get(ACME, "/runs?limit=1000").await.status, 200);
}

#[tokio::test]
async fn get_run_has_strong_etag_and_304() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let path = format!("/runs/{}", wire_id::project(&run));
    let r = h.get(ACME, &path).await;
    let etag = r.header("etag").unwrap().to_owned();
    assert!(etag.starts_with('"'));
    let r = h
        .send(
            h.http
                .get(h.url(&path))
                .bearer_auth(ACME)
                .header("If-None-Match", &etag),
        )
        .await;
    assert_eq!(r.status, 304);
    assert_eq!(r.header("openwop-version"), Some("2.0"));
    h.resolve(ACME, &run, "gate", json!({"action": "accept"}))
        .await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let r = h
        .send(
            h.http
                .get(h.url(&path))
                .bearer_auth(ACME)
                .header("If-None-Match", &etag),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_ne!(r.header("etag"), Some(etag.as_str()));
}

#[tokio::test]
async fn idempotent_create_replays_the_same_run() {
    let h = H::new().await;
    let key = "idem-key-0123456789abcdefXYZ";
    let body = json!({"workflowId": "conformance-approval"});
    let send = |b: Value, k: &'static str, bearer: &'static str| {
        h.send(
            h.http
                .post(h.url("/runs"))
                .bearer_auth(bearer)
                .header("Idempotency-Key", k)
                .json(&b),
        )
    };
    let first = send(body.clone(), key, ACME).await;
    assert_eq!(first.status, 201);
    assert!(first.header("openwop-idempotent-replay").is_none());
    let again = send(body.clone(), key, ACME).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.header("openwop-idempotent-replay"), Some("true"));
    assert_eq!(again.body["runId"], first.body["runId"]);
    assert_eq!(
        h.get(ACME, "/runs?workflowId=conformance-approval")
            .await
            .body["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let other = send(json!({"workflowId": "conformance-noop"}), key, ACME).await;
    assert_eq!(
        (other.status.as_u16(), other.error()),
        (409, "idempotency_key_mismatch")
    );
    // The record is per tenant.
    let g = send(body.clone(), key, GLOBEX).await;
    assert_eq!(g.status, 201);
    assert_ne!(g.body["runId"], first.body["runId"]);
    let bad = send(body, "short", ACME).await;
    assert_eq!(
        (bad.status.as_u16(), bad.error()),
        (400, "idempotency_key_invalid")
    );
}

#[tokio::test]
async fn idempotent_cancel_and_resolve_replay() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let path = format!("/runs/{}/interrupts/gate", wire_id::project(&run));
    let resolve = || {
        h.send(
            h.http
                .post(h.url(&path))
                .bearer_auth(ACME)
                .header("Idempotency-Key", "resolve-key-0123456789abcdef")
                .json(&json!({"resumeValue": {"action": "accept"}})),
        )
    };
    let a = resolve().await;
    let b = resolve().await;
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (200, 200));
    assert_eq!(b.header("openwop-idempotent-replay"), Some("true"));
    assert_eq!(a.raw, b.raw);
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    assert_eq!(
        count(&h.event_types(ACME, &run).await, "interrupt.resolved"),
        1
    );

    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let path = format!("/runs/{}/cancel", wire_id::project(&run));
    let cancel = || {
        h.send(
            h.http
                .post(h.url(&path))
                .bearer_auth(ACME)
                .header("Idempotency-Key", "cancel-key-0123456789abcdef")
                .json(&json!({"reason": "because"})),
        )
    };
    let a = cancel().await;
    let b = cancel().await;
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (200, 200));
    assert_eq!(b.header("openwop-idempotent-replay"), Some("true"));
    assert_eq!(count(&h.event_types(ACME, &run).await, "run.cancelled"), 1);
}

#[tokio::test]
async fn cancel_body_is_closed() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    let r = h.cancel(ACME, &run, json!({"why": "x"})).await;
    assert_eq!((r.status.as_u16(), r.error()), (400, "validation_error"));
    let r = h.cancel(ACME, &run, json!({"reason": 5})).await;
    assert_eq!(r.status, 400);
    // An empty body is fine.
    let r = h
        .send(
            h.http
                .post(h.url(&format!("/runs/{}/cancel", pct(&run))))
                .bearer_auth(ACME),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test]
async fn workflow_definitions_and_tools_describe_the_fixtures() {
    let h = H::new().await;
    let r = h.get(ACME, "/workflows/conformance-delay").await;
    assert_eq!(r.status, 200);
    let wf = &r.body;
    assert_eq!(wf["id"], "conformance-delay");
    for k in [
        "name",
        "version",
        "description",
        "nodes",
        "edges",
        "triggers",
        "variables",
        "metadata",
        "settings",
    ] {
        assert!(wf.get(k).is_some(), "{k}");
    }
    assert_eq!(wf["triggers"], json!([{"type": "manual"}]));
    assert_eq!(wf["nodes"][0]["typeId"], "core.delay");
    assert_eq!(wf["variables"][0]["name"], "delayMs");
    assert_eq!(wf["variables"][0]["type"], "number");
    assert_eq!(wf["variables"][0]["required"], true);
    assert_eq!(wf["variables"][0]["defaultValue"], 1000);
    let r = h
        .get(ACME, "/workflows/conformance-approval-approvers")
        .await;
    assert_eq!(
        r.body["nodes"][0]["config"]["approversList"],
        json!(["urn:conformance:listed-approver"])
    );
    assert_eq!(h.get(ACME, "/workflows/nope").await.status, 404);

    let tools = h.get(ACME, "/tools").await.body;
    let tools = tools.as_array().unwrap();
    let delay = tools
        .iter()
        .find(|t| t["toolId"] == "conformance-delay")
        .unwrap();
    assert_eq!(delay["source"], "workflow");
    assert!(delay["safetyTier"].is_string());
    let schema = &delay["inputSchema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["delayMs"]["type"], "number");
    assert_eq!(schema["properties"]["delayMs"]["default"], 1000);
    assert_eq!(schema["properties"]["delayMs"]["maximum"], 30000);
    let compact = h.get(ACME, "/tools?view=compact").await.body;
    assert_eq!(compact["tools"].as_array().unwrap().len(), tools.len());
}

#[tokio::test]
async fn recorded_requests_keep_raw_paths_in_arrival_order() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.host.clear_requests();
    h.get(ACME, &format!("/runs/{}", pct(&run))).await;
    h.get(
        ACME,
        &format!("/runs/{}/events/poll?timeout=1", wire_id::project(&run)),
    )
    .await;
    let reqs = h.host.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].path, format!("/runs/{}", pct(&run)));
    assert!(reqs[0].path.contains("%2F"));
    assert_eq!(reqs[0].query, None);
    assert_eq!(
        reqs[1].path,
        format!("/runs/{}/events/poll", wire_id::project(&run))
    );
    assert_eq!(reqs[1].query.as_deref(), Some("timeout=1"));
    assert_eq!(reqs[0].header("authorization"), Some("Bearer acme-dev-key"));
    assert!(reqs[0].headers.iter().all(|(k, _)| *k == k.to_lowercase()));
    assert!(reqs[0].at <= reqs[1].at);
    h.post(ACME, "/runs", json!({"workflowId": "conformance-noop"}))
        .await;
    let last = h.host.requests().pop().unwrap();
    assert_eq!(last.method, "POST");
    assert_eq!(
        serde_json::from_slice::<Value>(&last.body).unwrap(),
        json!({"workflowId": "conformance-noop"})
    );
}

#[tokio::test]
async fn default_config_documents_its_keys() {
    let c = DevHostConfig::default();
    assert_eq!(c.key_for("acme"), Some("acme-dev-key"));
    assert_eq!(c.key_for("globex"), Some("globex-dev-key"));
    assert_eq!(c.key_for("nobody"), None);
    assert_eq!(c.sse_keepalive, Duration::from_secs(15));
    assert!(!c.anonymous);
    let h = H::new().await;
    assert!(h.host.base_url().starts_with("http://127.0.0.1:"));
    assert!(!h.host.base_url().ends_with('/'));
    assert_eq!(h.host.base_url(), format!("http://{}", h.host.addr()));
    h.host.clone().shutdown().await;
    assert!(h
        .http
        .get(h.url("/.well-known/openwop"))
        .send()
        .await
        .is_err());
}
