//! Signed interrupt tokens (OpenWOP v2 interrupt.md, resolveInterruptByRun "Tokens"): minted for the open
//! interrupt, usable without a bearer, refused once the interrupt is gone.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod common;

use std::time::Duration;

use common::*;
use openwop_devhost::wire_id;
use serde_json::json;

const SOON: Duration = Duration::from_secs(5);

async fn token(h: &H, key: &str, run: &str) -> Resp {
    h.get(
        key,
        &format!("/runs/{}/interrupts/gate", wire_id::project(run)),
    )
    .await
}

#[tokio::test]
async fn token_inspects_and_resolves_without_a_bearer() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let t = token(&h, ACME, &run).await;
    assert_eq!(t.status, 200, "{}", t.body);
    let tok = t.body["token"].as_str().unwrap().to_owned();
    assert!(tok.starts_with("ow2.hs256."), "{tok}");
    assert_eq!(t.body["kind"], "approval");
    let suspended = h
        .events(ACME, &run)
        .await
        .into_iter()
        .find(|e| e["type"] == "node.suspended")
        .unwrap();
    assert_eq!(t.body["interruptId"], suspended["payload"]["interruptId"]);

    let inspect = h
        .send(h.http.get(h.url(&format!("/interrupts/{tok}"))))
        .await;
    assert_eq!(inspect.status, 200, "{}", inspect.body);
    assert_eq!(inspect.body["kind"], "approval");
    assert_eq!(inspect.body["data"]["actions"], json!(["accept", "reject"]));

    let r = h
        .send(
            h.http
                .post(h.url(&format!("/interrupts/{tok}")))
                .json(&json!({"resumeValue": {"action": "accept"}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let resolved = h
        .events(ACME, &run)
        .await
        .into_iter()
        .find(|e| e["type"] == "interrupt.resolved")
        .unwrap();
    assert_eq!(
        resolved["payload"]["resolvedBy"]["subjectId"],
        "urn:devhost:acme:alice"
    );
    // Invalidated by the resolution.
    let again = h
        .send(h.http.get(h.url(&format!("/interrupts/{tok}"))))
        .await;
    assert_eq!(
        (again.status.as_u16(), again.error()),
        (409, "interrupt_already_resolved")
    );
}

#[tokio::test]
async fn tampered_token_is_401_and_cancel_invalidates_tokens() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let tok = token(&h, ACME, &run).await.body["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let bad = h
        .send(h.http.get(h.url(&format!("/interrupts/{tok}x"))))
        .await;
    assert_eq!(
        (bad.status.as_u16(), bad.error()),
        (401, "interrupt_token_invalid")
    );
    h.cancel(ACME, &run, json!({})).await;
    let gone = h
        .send(h.http.get(h.url(&format!("/interrupts/{tok}"))))
        .await;
    assert_eq!(
        (gone.status.as_u16(), gone.error()),
        (410, "interrupt_cancelled")
    );
}

#[tokio::test]
async fn token_carries_the_minting_principal_for_approver_checks() {
    let h = H::new().await;
    let run = h
        .create(ACME, "conformance-approval-approvers", json!({}))
        .await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    for (key, want) in [(ACME, 403), (APPROVER, 200)] {
        let tok = token(&h, key, &run).await.body["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let r = h
            .send(
                h.http
                    .post(h.url(&format!("/interrupts/{tok}")))
                    .json(&json!({"resumeValue": {"action": "accept"}})),
            )
            .await;
        assert_eq!(r.status, want, "{key}: {}", r.body);
    }
    h.wait_status(ACME, &run, &["completed"], SOON).await;
}

#[tokio::test]
async fn minting_needs_an_open_interrupt_and_the_respond_scope() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let r = h
        .get(
            ACME,
            &format!("/runs/{}/interrupts/noop", wire_id::project(&run)),
        )
        .await;
    assert_eq!((r.status.as_u16(), r.error()), (404, "interrupt_not_found"));
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    assert_eq!(token(&h, READONLY, &run).await.status, 403);
    assert_eq!(token(&h, GLOBEX, &run).await.error(), "id_tenant_mismatch");
}

#[tokio::test]
async fn recording_can_be_switched_off() {
    let h = H::new().await;
    h.host.set_recording(false);
    h.get(ACME, "/tools").await;
    assert!(h.host.requests().is_empty());
    h.host.set_recording(true);
    h.get(ACME, "/tools").await;
    assert_eq!(h.host.requests().len(), 1);
}
