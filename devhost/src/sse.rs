//! `GET /runs/{id}/events` as Server-Sent Events (OpenWOP v2 events.md).
//!
//! A task per stream replays the log (or resumes after `Last-Event-ID`), then waits on
//! the run's change counter and writes each new event as its own frame the moment it
//! is appended; nothing is buffered unless the caller asked for `bufferMs`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response};
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::Frame;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::api::{ApiError, Body};
use crate::runs::{is_terminal_event, Run};
use crate::state::{Dialect, HostState};

const SUPPORTED: [&str; 4] = ["updates", "values", "messages", "debug"];

#[derive(Debug, Clone, Copy, Default)]
struct Modes {
    updates: bool,
    values: bool,
    messages: bool,
    debug: bool,
}

impl Modes {
    /// `values`, or a comma list of `updates|messages|debug` (default `updates`).
    fn parse(raw: Option<&str>) -> Result<Modes, ApiError> {
        let unsupported = |m: &str| {
            ApiError::new(
                400,
                "unsupported_stream_mode",
                format!("streamMode {m} is not supported"),
            )
            .detail("supported", json!(SUPPORTED))
        };
        let Some(raw) = raw else {
            return Ok(Modes {
                updates: true,
                ..Modes::default()
            });
        };
        if raw == "values" {
            return Ok(Modes {
                values: true,
                ..Modes::default()
            });
        }
        let mut m = Modes::default();
        for part in raw.split(',') {
            match part.trim() {
                "updates" => m.updates = true,
                "messages" => m.messages = true,
                "debug" => m.debug = true,
                _ => return Err(unsupported(raw)),
            }
        }
        Ok(m)
    }

    /// `debug` carries everything; `updates` carries run transitions, terminal node
    /// transitions, suspensions and interrupt events, i.e. all but `node.started`.
    fn carries(&self, ty: &str) -> bool {
        self.debug
            || (self.updates && ty != "node.started")
            || (self.messages && ty.starts_with("ai.message"))
    }
}

type Tx = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

async fn send(tx: &Tx, text: String) -> bool {
    tx.send(Ok(Frame::data(Bytes::from(text)))).await.is_ok()
}

fn frame(id: Option<i64>, event: &str, data: &Value) -> String {
    let data = serde_json::to_string(data).unwrap_or_default();
    match id {
        Some(id) => format!("id: {id}\nevent: {event}\ndata: {data}\n\n"),
        None => format!("event: {event}\ndata: {data}\n\n"),
    }
}

fn seq_of(ev: &Value) -> i64 {
    ev.get("sequence").and_then(Value::as_i64).unwrap_or(-1)
}

fn type_of(ev: &Value) -> &str {
    ev.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Validate the request and start the stream task.
pub(crate) fn stream(
    host: &Arc<HostState>,
    run: Arc<Run>,
    query: &[(String, String)],
    headers: &HeaderMap,
) -> Result<Response<Body>, ApiError> {
    let get = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let modes = Modes::parse(get("streamMode"))?;
    let buffer_ms = match get("bufferMs") {
        None => 0,
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n <= 5000 => n,
            _ => {
                return Err(ApiError::validation(
                    "bufferMs",
                    "bufferMs must be an integer in 0..5000",
                ))
            }
        },
    };
    let resume_after = match headers.get("last-event-id") {
        None => -1,
        Some(v) => match v.to_str().ok().and_then(|s| s.trim().parse::<i64>().ok()) {
            Some(n) if n >= -1 => n,
            _ => {
                return Err(ApiError::validation(
                    "Last-Event-ID",
                    "Last-Event-ID must be an event sequence",
                ))
            }
        },
    };
    let (tx, rx) = mpsc::channel(64);
    let task = StreamTask {
        run,
        tx,
        modes,
        buffer: Duration::from_millis(buffer_ms),
        keepalive: host.config.sse_keepalive,
        shutdown: host.shutdown.clone(),
        cursor: resume_after,
        dialect: host.dialect,
    };
    tokio::spawn(task.run());
    let body = StreamBody::new(ReceiverStream::new(rx))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    // Ask intermediaries (nginx and friends) not to buffer the stream.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

struct StreamTask {
    run: Arc<Run>,
    tx: Tx,
    modes: Modes,
    buffer: Duration,
    keepalive: Duration,
    shutdown: tokio::sync::watch::Receiver<bool>,
    /// Sequence of the last event already delivered (or skipped by mode).
    cursor: i64,
    /// The shapes frames carry (the legacy flavour's `jobId`, `state`, ...).
    dialect: Dialect,
}

impl StreamTask {
    async fn run(mut self) {
        let mut changes = self.run.subscribe();
        let keepalive = self.keepalive.max(Duration::from_millis(10));
        // In `values` mode a (re)connect starts with the current state (§1.8).
        if self.modes.values && !self.emit_snapshot().await {
            return;
        }
        loop {
            changes.borrow_and_update();
            let (fresh, done) = self.pending();
            if !fresh.is_empty() && !self.write(fresh).await {
                return;
            }
            if done {
                return; // the terminal event has been delivered: close (§1.8)
            }
            tokio::select! {
                r = changes.changed() => {
                    if r.is_err() { return; }
                    if !self.buffer.is_zero() {
                        // bufferMs: gather what arrives in the window into one batch.
                        tokio::time::sleep(self.buffer).await;
                    }
                }
                _ = tokio::time::sleep(keepalive) => {
                    if !send(&self.tx, ": keep-alive\n\n".into()).await { return; }
                }
                _ = self.tx.closed() => return,
                _ = crate::util::stopped(&mut self.shutdown) => return,
            }
        }
    }

    /// Events after the cursor, and whether the stream ends after them.
    fn pending(&self) -> (Vec<Value>, bool) {
        let st = self.run.lock();
        let start = usize::try_from(self.cursor + 1).unwrap_or(0);
        let fresh: Vec<Value> = st.events.iter().skip(start).cloned().collect();
        let done = st.status.is_terminal()
            && st
                .events
                .last()
                .is_some_and(|e| is_terminal_event(type_of(e)));
        (fresh, done)
    }

    async fn write(&mut self, fresh: Vec<Value>) -> bool {
        let last = fresh.last().map(seq_of).unwrap_or(self.cursor);
        if self.modes.values {
            self.cursor = last;
            return self.emit_snapshot().await;
        }
        let carried: Vec<Value> = fresh
            .into_iter()
            .filter(|e| self.modes.carries(type_of(e)))
            .map(self.dialect.event)
            .collect();
        self.cursor = last;
        if carried.is_empty() {
            return true;
        }
        if !self.buffer.is_zero() {
            let id = carried.last().map(seq_of);
            return send(&self.tx, frame(id, "batch", &Value::Array(carried))).await;
        }
        for ev in carried {
            if !send(&self.tx, frame(Some(seq_of(&ev)), type_of(&ev), &ev)).await {
                return false;
            }
        }
        true
    }

    async fn emit_snapshot(&mut self) -> bool {
        let (snapshot, last) = {
            let st = self.run.lock();
            (self.run.snapshot(&st), st.events.len() as i64 - 1)
        };
        let snapshot = (self.dialect.snapshot)(snapshot);
        self.cursor = self.cursor.max(last);
        let id = (last >= 0).then_some(last);
        send(&self.tx, frame(id, "state.snapshot", &snapshot)).await
    }
}
