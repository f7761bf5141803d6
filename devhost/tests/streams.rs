//! Event delivery: long polls and SSE streams wake on new events, resume, and close
//! (OpenWOP v2 events.md).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use openwop_devhost::{wire_id, DevHostConfig};
use serde_json::{json, Value};

const SOON: Duration = Duration::from_secs(5);

/// One parsed SSE frame (or a comment, with `event == ":"`).
#[derive(Debug, Clone)]
struct Sse {
    id: Option<String>,
    event: String,
    data: Option<Value>,
}

struct SseReader {
    resp: reqwest::Response,
    buf: String,
}

impl SseReader {
    async fn open(h: &H, key: &str, run: &str, query: &str, last_id: Option<&str>) -> SseReader {
        let mut req = h
            .http
            .get(h.url(&format!("/runs/{}/events{query}", wire_id::project(run))))
            .bearer_auth(key)
            .header("OpenWOP-Version", "2.0")
            .header("Accept", "text/event-stream");
        if let Some(id) = last_id {
            req = req.header("Last-Event-ID", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        assert_eq!(resp.headers()["openwop-version"], "2.0");
        SseReader {
            resp,
            buf: String::new(),
        }
    }

    /// Next frame, or None when the stream ended.
    async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut f = Sse {
                    id: None,
                    event: "message".into(),
                    data: None,
                };
                for line in block.lines() {
                    if line.starts_with(':') {
                        f.event = ":".into();
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        f.id = Some(v.into());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        f.event = v.into();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        f.data = Some(serde_json::from_str(v).unwrap());
                    }
                }
                return Some(f);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.resp.chunk())
                .await
                .expect("stream stalled")
                .unwrap()?;
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Every event frame until the stream closes (keep-alives skipped).
    async fn rest(&mut self) -> Vec<Sse> {
        let mut out = Vec::new();
        while let Some(f) = self.next().await {
            if f.event != ":" {
                out.push(f);
            }
        }
        out
    }
}

#[tokio::test]
async fn poll_returns_the_whole_log_and_respects_after_sequence() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let base = format!("/runs/{}/events/poll", pct(&run));
    let r = h.get(ACME, &format!("{base}?timeout=1")).await.body;
    assert_eq!(r["runId"], run.as_str());
    assert_eq!(r["status"], "completed");
    assert_eq!(r["isTerminal"], true);
    assert_eq!(r["lastSequence"], 3);
    let events = r["events"].as_array().unwrap();
    assert_eq!(events.len(), 4);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence"], i);
        assert_eq!(e["schemaVersion"], 1);
        assert_eq!(e["runId"], run.as_str());
        assert!(e["eventId"].as_str().unwrap().len() >= 16);
        let ts = e["timestamp"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 24, "{ts}");
    }
    let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["runId", "events", "lastSequence", "status", "isTerminal"]
    );
    let r = h
        .get(ACME, &format!("{base}?afterSequence=1&timeout=1"))
        .await
        .body;
    let seqs: Vec<i64> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sequence"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, [2, 3]);
    // Past the end of a terminal run: empty at once, no long poll.
    let t0 = Instant::now();
    let r = h
        .get(ACME, &format!("{base}?afterSequence=10&timeout=30"))
        .await
        .body;
    assert!(r["events"].as_array().unwrap().is_empty());
    assert!(t0.elapsed() < Duration::from_secs(1));
    for bad in [
        "?timeout=0",
        "?timeout=61",
        "?afterSequence=x",
        "?afterSequence=-2",
    ] {
        let r = h.get(ACME, &format!("{base}{bad}")).await;
        assert_eq!(
            (r.status.as_u16(), r.error()),
            (400, "validation_error"),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn long_poll_wakes_on_a_new_event() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let last = h.events(ACME, &run).await.len() - 1;
    let path = format!(
        "/runs/{}/events/poll?afterSequence={last}&timeout=20",
        pct(&run)
    );
    let t0 = Instant::now();
    let (poll, _) = tokio::join!(h.get(ACME, &path), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = h
            .resolve(ACME, &run, "gate", json!({"action": "accept"}))
            .await;
        assert_eq!(r.status, 200);
    });
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "returned before the event: {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "did not wake: {waited:?}");
    let events = poll.body["events"].as_array().unwrap();
    assert!(!events.is_empty());
    assert_eq!(events[0]["sequence"], last as i64 + 1);
    assert_eq!(events[0]["type"], "interrupt.resolved");
}

#[tokio::test]
async fn long_poll_times_out_empty_on_a_quiet_run() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let last = h.events(ACME, &run).await.len() - 1;
    let t0 = Instant::now();
    let r = h
        .get(
            ACME,
            &format!(
                "/runs/{}/events/poll?afterSequence={last}&timeout=1",
                pct(&run)
            ),
        )
        .await;
    assert!(t0.elapsed() >= Duration::from_millis(900));
    assert!(r.body["events"].as_array().unwrap().is_empty());
    assert_eq!(r.body["lastSequence"], last as i64);
    assert_eq!(r.body["status"], "waiting-approval");
    assert_eq!(r.body["isTerminal"], false);
}

#[tokio::test]
async fn sse_delivers_the_first_event_before_the_run_ends_then_closes() {
    let h = H::new().await;
    let run = h
        .create(ACME, "conformance-delay", json!({"delayMs": 1500}))
        .await;
    let mut s = SseReader::open(&h, ACME, &run, "", None).await;
    let first = s.next().await.unwrap();
    assert_eq!(first.event, "run.started");
    assert_eq!(first.id.as_deref(), Some("0"));
    assert_eq!(first.data.as_ref().unwrap()["sequence"], 0);
    // The run is still sleeping: the frame was written as it happened.
    assert_eq!(h.run(ACME, &run).await.body["status"], "running");
    let rest = s.rest().await;
    let last = rest.last().unwrap();
    assert_eq!(last.event, "run.completed");
    assert_eq!(h.run(ACME, &run).await.body["status"], "completed");
}

#[tokio::test]
async fn sse_headers_arrive_while_the_run_is_suspended_and_events_follow_live() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let mut s = tokio::time::timeout(
        Duration::from_secs(2),
        SseReader::open(&h, ACME, &run, "?streamMode=debug", None),
    )
    .await
    .expect("headers flushed at once");
    let mut types = Vec::new();
    for _ in 0..5 {
        types.push(s.next().await.unwrap().event);
    }
    assert_eq!(
        types,
        [
            "run.started",
            "node.started",
            "interrupt.requested",
            "approval.requested",
            "node.suspended"
        ]
    );
    h.resolve(ACME, &run, "gate", json!({"action": "accept"}))
        .await;
    let rest: Vec<String> = s.rest().await.into_iter().map(|f| f.event).collect();
    assert_eq!(
        rest,
        [
            "interrupt.resolved",
            "approval.resolved",
            "node.resumed",
            "node.completed",
            "run.completed"
        ]
    );
}

#[tokio::test]
async fn sse_resumes_after_last_event_id_without_repeating_it() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let mut s = SseReader::open(&h, ACME, &run, "?streamMode=debug", Some("1")).await;
    let frames = s.rest().await;
    let ids: Vec<&str> = frames.iter().map(|f| f.id.as_deref().unwrap()).collect();
    assert_eq!(ids, ["2", "3"]);
    assert_eq!(frames[1].event, "run.completed");
    // Resuming at the terminal event itself closes at once.
    let mut s = SseReader::open(&h, ACME, &run, "", Some("3")).await;
    assert!(s.rest().await.is_empty());
}

#[tokio::test]
async fn sse_updates_mode_omits_node_started() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let mut s = SseReader::open(&h, ACME, &run, "", None).await;
    let types: Vec<String> = s.rest().await.into_iter().map(|f| f.event).collect();
    assert_eq!(types, ["run.started", "node.completed", "run.completed"]);
}

#[tokio::test]
async fn sse_values_mode_sends_state_snapshots() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let mut s = SseReader::open(&h, ACME, &run, "?streamMode=values", None).await;
    let frames = s.rest().await;
    assert!(!frames.is_empty());
    assert!(frames.iter().all(|f| f.event == "state.snapshot"));
    assert_eq!(
        frames.last().unwrap().data.as_ref().unwrap()["status"],
        "completed"
    );
}

#[tokio::test]
async fn sse_refuses_unsupported_stream_modes() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    for mode in ["bogus", "values,updates", "updates,nope"] {
        let r = h
            .get(
                ACME,
                &format!("/runs/{}/events?streamMode={mode}", pct(&run)),
            )
            .await;
        assert_eq!(
            (r.status.as_u16(), r.error()),
            (400, "unsupported_stream_mode"),
            "{mode}"
        );
        assert!(r.body["details"]["supported"].is_array());
    }
    let r = h
        .get(
            ACME,
            &format!("/runs/{}/events?streamMode=updates,debug", pct(&run)),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn sse_sends_keep_alive_comments_on_idle_streams() {
    let h = H::with(DevHostConfig {
        sse_keepalive: Duration::from_millis(100),
        ..DevHostConfig::default()
    })
    .await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let mut s = SseReader::open(&h, ACME, &run, "", None).await;
    let mut comments = 0;
    let t0 = Instant::now();
    while comments < 2 {
        let f = s.next().await.unwrap();
        if f.event == ":" {
            comments += 1;
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn sse_batches_when_buffer_ms_is_set() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-noop", json!({})).await;
    h.wait_status(ACME, &run, &["completed"], SOON).await;
    let mut s = SseReader::open(&h, ACME, &run, "?bufferMs=50&streamMode=debug", None).await;
    let frames = s.rest().await;
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].event, "batch");
    assert_eq!(frames[0].id.as_deref(), Some("3"));
    assert_eq!(
        frames[0].data.as_ref().unwrap().as_array().unwrap().len(),
        4
    );
}

#[tokio::test]
async fn cancelled_stream_closes_after_run_cancelled() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-cancellable", json!({})).await;
    let mut s = SseReader::open(&h, ACME, &run, "", None).await;
    assert_eq!(s.next().await.unwrap().event, "run.started");
    h.cancel(ACME, &run, json!({"reason": "test"})).await;
    let rest = s.rest().await;
    let last = rest.last().unwrap();
    assert_eq!(last.event, "run.cancelled");
    assert_eq!(last.data.as_ref().unwrap()["payload"]["reason"], "test");
}

#[tokio::test]
async fn shutdown_ends_open_streams_and_long_polls_promptly() {
    let h = H::new().await;
    let run = h.create(ACME, "conformance-approval", json!({})).await;
    h.wait_status(ACME, &run, &["waiting-approval"], SOON).await;
    let mut s = SseReader::open(&h, ACME, &run, "", None).await;
    assert_eq!(s.next().await.unwrap().event, "run.started");
    let poll = tokio::spawn({
        let http = h.http.clone();
        let url = h.url(&format!(
            "/runs/{}/events/poll?afterSequence=100&timeout=60",
            pct(&run)
        ));
        async move { http.get(url).bearer_auth(ACME).send().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    tokio::time::timeout(Duration::from_secs(3), h.host.clone().shutdown())
        .await
        .expect("shutdown is prompt");
    // The stream ends (cleanly or with a transport error), it does not hang.
    let ended = tokio::time::timeout(Duration::from_secs(3), async {
        while let Ok(Some(_)) = s.resp.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "stream still open after shutdown");
    let polled = tokio::time::timeout(Duration::from_secs(3), poll).await;
    assert!(polled.is_ok(), "long poll still open after shutdown");
    assert!(t0.elapsed() < Duration::from_secs(5));
}
