//! The fault switches (devhost only): deterministic failures for the sidecar's
//! retry, timeout and reconnect tests.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use openwop_devhost::{wire_id, RouteClass};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const SOON: Duration = Duration::from_secs(5);

async fn run_count(h: &H) -> usize {
    h.get(ACME, "/runs?limit=100").await.body["runs"]
        .as_array()
        .unwrap()
        .len()
}

/// One raw HTTP/1.1 exchange; returns (head, body bytes as received, whether the
/// read ended in an error). Reading stops at EOF or a reset.
async fn raw_get(h: &H, path: &str) -> (String, Vec<u8>, bool) {
    let mut s = tokio::net::TcpStream::connect(h.host.addr()).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: devhost\r\nAuthorization: Bearer {ACME}\r\n\
         OpenWOP-Version: 2.0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let errored = loop {
        match tokio::time::timeout(SOON, s.read(&mut chunk)).await {
            Ok(Ok(0)) => break false,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
            Ok(Err(_)) => break true,
            Err(_) => panic!("the connection neither ended nor was reset"),
        }
    };
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    (head, buf[split + 4..].to_vec(), errored)
}

/// Decode a chunked body; returns the data and whether the final `0` chunk came.
fn dechunk(mut b: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return (out, false);
        };
        let size =
            usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return (out, true);
        }
        let data = &b[eol + 2..];
        let take = size.min(data.len());
        out.extend_from_slice(&data[..take]);
        if take < size || data.len() < size + 2 {
            return (out, false);
        }
        b = &data[size + 2..];
    }
}

#[tokio::test]
async fn no_faults_by_default_and_requests_are_counted_per_route_class() {
    let h = H::new().await;
    let faults = h.host.faults();
    assert!(faults.active().is_empty());
    h.get(ACME, "/.well-known/openwop").await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.run(ACME, &run).await;
    h.run(ACME, &run).await;
    h.events(ACME, &run).await;
    h.get(ACME, "/workflows/conformance-noop").await;
    assert_eq!(faults.count(RouteClass::Discovery), 1);
    assert_eq!(faults.count(RouteClass::CreateRun), 1);
    assert_eq!(faults.count(RouteClass::GetRun), 2);
    assert_eq!(faults.count(RouteClass::Poll), 1);
    assert_eq!(faults.count(RouteClass::Other), 1);
    assert_eq!(faults.count(RouteClass::All), 6);
    faults.reset_counts();
    assert_eq!(faults.count(RouteClass::All), 0);
}

#[tokio::test]
async fn fail_next_answers_the_status_without_processing_the_request() {
    let h = H::new().await;
    h.host.faults().fail_next(RouteClass::CreateRun, 2, 503);
    for _ in 0..2 {
        let r = h
            .post(ACME, "/runs", json!({ "workflowId": "conformance-noop" }))
            .await;
        assert_eq!(r.status, 503);
        assert_eq!(r.error(), "runner_unavailable");
        assert_eq!(r.header("openwop-version"), Some("2.0"));
    }
    assert_eq!(run_count(&h).await, 0, "a failed create creates nothing");
    h.create(ACME, "conformance-noop", json!({})).await;
    assert_eq!(run_count(&h).await, 1);
    assert_eq!(h.host.faults().count(RouteClass::CreateRun), 3);
}

#[tokio::test]
async fn rate_limit_faults_carry_retry_after() {
    let h = H::new().await;
    let faults = h.host.faults();
    faults.rate_limit_next(RouteClass::Poll, 1, 7);
    faults.fail_next(RouteClass::Poll, 1, 429);
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    let path = format!("/runs/{}/events/poll?timeout=1", pct(&run));
    let r = h.get(ACME, &path).await;
    assert_eq!(
        (r.status.as_u16(), r.header("retry-after")),
        (429, Some("7"))
    );
    assert_eq!(r.error(), "rate_limited");
    let r = h.get(ACME, &path).await;
    assert_eq!(
        (r.status.as_u16(), r.header("retry-after")),
        (429, Some("1"))
    );
    assert_eq!(h.get(ACME, &path).await.status, 200);
}

#[tokio::test]
async fn a_fault_on_all_routes_hits_every_class() {
    let h = H::new().await;
    h.host.faults().fail_next(RouteClass::All, 2, 500);
    assert_eq!(h.get(ACME, "/.well-known/openwop").await.status, 500);
    let r = h.get(ACME, "/workflows/conformance-noop").await;
    assert_eq!((r.status.as_u16(), r.error()), (500, "internal_error"));
    assert_eq!(h.get(ACME, "/.well-known/openwop").await.status, 200);
}

#[tokio::test]
async fn delay_holds_the_answer_back_after_the_request_took_effect() {
    let h = H::new().await;
    h.host
        .faults()
        .delay(RouteClass::CreateRun, Duration::from_millis(600));
    let t0 = Instant::now();
    let create = h.post(ACME, "/runs", json!({ "workflowId": "conformance-noop" }));
    let probe = async {
        tokio::time::sleep(Duration::from_millis(250)).await;
        run_count(&h).await
    };
    let (r, seen) = tokio::join!(create, probe);
    assert_eq!(r.status, 201);
    assert!(t0.elapsed() >= Duration::from_millis(600));
    assert_eq!(seen, 1, "the run exists while its answer is held back");
    h.host.faults().clear();
    let t0 = Instant::now();
    h.create(ACME, "conformance-noop", json!({})).await;
    assert!(t0.elapsed() < Duration::from_millis(300));
}

#[tokio::test]
async fn reset_aborts_the_connection_after_the_given_body_bytes() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let path = format!("/runs/{}", wire_id::project(&run));
    let whole = h.get(ACME, &path).await.raw;

    h.host.faults().reset_next(RouteClass::GetRun, 1, 10);
    let (head, body, _) = raw_get(&h, &path).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (data, finished) = dechunk(&body);
    assert_eq!(data, &whole[..10]);
    assert!(!finished, "the body never ends cleanly");

    // Through a real client the body read fails.
    h.host.faults().reset_next(RouteClass::GetRun, 1, 10);
    let resp = h
        .http
        .get(h.url(&path))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert!(resp.bytes().await.is_err());
    assert_eq!(
        h.get(ACME, &path).await.raw,
        whole,
        "one reset, then normal"
    );
}

#[tokio::test]
async fn reset_on_create_still_creates_the_run() {
    let h = H::new().await;
    h.host.faults().reset_next(RouteClass::CreateRun, 1, 0);
    let resp = h
        .http
        .post(h.url("/runs"))
        .bearer_auth(ACME)
        .json(&json!({ "workflowId": "conformance-noop" }))
        .send()
        .await;
    let failed = match resp {
        Err(_) => true,
        Ok(r) => r.bytes().await.is_err(),
    };
    assert!(failed);
    assert_eq!(run_count(&h).await, 1);
}

#[tokio::test]
async fn bad_json_answers_a_truncated_body_with_the_real_status() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    let path = format!("/runs/{}", wire_id::project(&run));
    h.host.faults().bad_json_next(RouteClass::GetRun, 1);
    let r = h.get(ACME, &path).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(!r.raw.is_empty());
    assert!(serde_json::from_slice::<serde_json::Value>(&r.raw).is_err());
    assert!(h.get(ACME, &path).await.body.is_object());
}

#[tokio::test]
async fn cut_stream_ends_mid_event_after_k_events() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let path = format!("/runs/{}/events", pct(&run));
    h.host.faults().cut_stream_next(1, 2);
    let (head, body, _) = raw_get(&h, &path).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (data, finished) = dechunk(&body);
    assert!(!finished);
    let text = String::from_utf8(data).unwrap();
    let complete: Vec<&str> = text.split("\n\n").collect();
    // Two whole events, then part of a third without its blank line.
    assert_eq!(complete.len(), 3, "{text}");
    assert!(complete[0].starts_with("id: 0\nevent: run.started\n"));
    assert!(complete[1].starts_with("id: 2\nevent: interrupt.requested\n"));
    assert!(complete[2].starts_with("id: 3\n"), "{text}");
    assert!(
        !complete[2].ends_with('}'),
        "the third event is cut: {text}"
    );

    // The fault is used up: the next stream carries every event (cancel first so
    // the stream ends).
    h.cancel(ACME, &run, json!({})).await;
    let (_, body, _) = raw_get(&h, &path).await;
    let (data, _) = dechunk(&body);
    let text = String::from_utf8(data).unwrap();
    assert!(text.contains("event: node.suspended"), "{text}");
    assert!(text.contains("event: run.cancelled"), "{text}");
}

#[tokio::test]
async fn admin_endpoint_sets_reads_and_clears_faults() {
    let h = H::new().await;
    let admin = h.url("/_devhost/faults");
    let r = h
        .send(h.http.post(&admin).json(&json!({
            "faults": [
                {"route": "createRun", "status": 503, "times": 1},
                {"route": "all", "delayMs": 1}
            ]
        })))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["faults"][0]["status"], 503);
    let c = h
        .post(ACME, "/runs", json!({ "workflowId": "conformance-noop" }))
        .await;
    assert_eq!(c.status, 503);

    let state = h.send(h.http.get(&admin)).await.body;
    assert_eq!(state["faults"], json!([{"route": "all", "delayMs": 1}]));
    assert_eq!(state["counts"]["createRun"], 1);
    assert_eq!(state["counts"]["all"], 1, "admin calls are not counted");

    let bad = h
        .send(h.http.post(&admin).json(&json!({
            "faults": [{"route": "getRun", "status": 503}, {"route": "nowhere", "status": 503}]
        })))
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["details"]["field"], "faults[1]");
    assert_eq!(h.host.faults().active().len(), 1, "nothing applied");

    let r = h
        .send(
            h.http
                .post(&admin)
                .json(&json!({ "clear": true, "resetCounts": true })),
        )
        .await;
    assert_eq!(r.body["faults"], json!([]));
    assert_eq!(r.body["counts"]["all"], 0);

    h.host.faults().fail_next(RouteClass::GetRun, 5, 503);
    let r = h.send(h.http.delete(&admin)).await;
    assert_eq!(r.body["faults"], json!([]));
    assert!(h.host.faults().active().is_empty());
}
