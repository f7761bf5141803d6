//! `openwop-mcp-sidecar stdio`: the MCP mount over stdin and stdout, for a client that launches
//! a local command instead of connecting to a URL (MCP 2026-07-28 Transports §stdio: one
//! JSON-RPC message per line, UTF-8, no embedded newlines; stdout carries nothing else, logs go
//! to stderr).
//!
//! Each line becomes the POST an HTTP client would send to the mount, served by the mount's
//! stack (src/stack/mod.rs `serve_mount`): the same envelope checks, the same era decision (src/mcp/legacy), the same host
//! client and the same ownership guards. What the HTTP client would put in headers is derived
//! here: the caller's bearer token (from the environment or a file: src/config/stdio.rs), and
//! for a 2026-07-28 message the headers its `_meta` and body mirror (MCP 2026-07-28
//! Transports §Request headers), for an initialize-era message the revision and session id
//! the `initialize` answer gave (one client per process, so they are kept here).
//!
//! Ownership is the HTTP rule (RFC 0198 §G.12) with stdio's signals: every request is served
//! on a task of its own, and dropping that task before its answer's last line is written is
//! the disconnect: the guards in the mount's future or body cancel the run with the
//! configured reason. A `notifications/cancelled` naming an unanswered request drops it
//! (MCP 2026-07-28 Cancellation; 2025-11-25 Basic Utilities Cancellation); stdin closing
//! drops every unanswered request, and the process exits once the cancels are delivered.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::mcp::method::{name_rule_of, Method};
use crate::mcp::{McpContext, META_VERSION};
use crate::server::AppState;
use io::{read_stdin, write_stdout, Input};

mod io;

static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
static MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// Lines written to stdout waiting for the writer; a client that stops reading holds the
/// answers back rather than growing memory.
const OUT_QUEUE: usize = 256;

/// What the `initialize` answer negotiated (2025-11-25 Basic Lifecycle §Initialization),
/// sent as `MCP-Protocol-Version` and `Mcp-Session-Id` with every later initialize-era message.
#[derive(Clone)]
struct Session {
    revision: String,
    id: Option<String>,
}

/// Where the caller's bearer token comes from (src/config/stdio.rs).
struct Credential {
    env: String,
    file: Option<PathBuf>,
}

impl Credential {
    /// `Authorization: Bearer <token>`, read now: the file on every request, so a token the
    /// operator's tooling refreshes is used from its next request on.
    fn header(&self) -> Option<HeaderValue> {
        let token = match &self.file {
            Some(p) => match std::fs::read_to_string(p) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(file = %p.display(), error = %e, "stdio.tokenFile cannot be read: the request is sent without a credential");
                    return None;
                }
            },
            None => std::env::var(&self.env).ok()?,
        };
        let token = token.trim();
        if token.is_empty() {
            return None;
        }
        let mut v = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        v.set_sensitive(true);
        Some(v)
    }
}

/// Serves stdin until it closes or `stop` completes, then cancels the runs of every
/// unanswered request and returns once those cancels are delivered (bounded by
/// `ownership.cancelDeadlineMs`).
pub async fn run(cfg: Config, stop: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (_lame_duck_tx, lame_duck_rx) = watch::channel(false);
    let credential = Credential {
        env: cfg.stdio.token_env.clone(),
        file: cfg.stdio.token_file.clone(),
    };
    if credential.file.is_none() && std::env::var_os(&credential.env).is_none() {
        tracing::warn!(
            "${} is not set (stdio.tokenEnv, stdio.tokenFile): requests reach the host without a credential",
            credential.env
        );
    }
    let max = cfg.limits.max_body_bytes;
    let state = AppState::new(cfg, shutdown_rx, lame_duck_rx)?;
    let ctx = state.mcp.clone();
    let uri: http::Uri = ctx.cfg.mount.path.parse()?;

    // A thread of its own, not the runtime's blocking pool: a blocked read of stdin cannot be
    // cancelled, and a runtime waits for its blocking pool when it shuts down.
    let (in_tx, mut in_rx) = mpsc::channel::<Input>(64);
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || read_stdin(max, in_tx))?;
    let (out_tx, out_rx) = mpsc::channel::<Bytes>(OUT_QUEUE);
    let stdout_gone = CancellationToken::new();
    let writer = tokio::spawn(write_stdout(out_rx, stdout_gone.clone()));

    let lines = Lines {
        ctx: ctx.clone(),
        uri,
        credential,
        session: Arc::default(),
        out: out_tx,
    };
    let mut tasks = JoinSet::new();
    let mut in_flight = InFlight::default();
    let mut stop = std::pin::pin!(stop);
    loop {
        let input = tokio::select! {
            biased;
            () = &mut stop => break,
            () = stdout_gone.cancelled() => {
                tracing::info!("stdout closed: the client is gone");
                break;
            }
            Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                in_flight.ended(match done {
                    Ok((tid, ())) => tid,
                    Err(e) => e.id(),
                });
                continue;
            }
            input = in_rx.recv() => match input {
                Some(i) => i,
                None => break,
            },
        };
        let line = match input {
            Input::Line(l) => l,
            Input::TooLong => {
                // The mount's own answer to a body over the limit (src/mcp/mod.rs).
                let e = json!({"jsonrpc": "2.0", "id": null, "error": {"code": crate::mcp::error::INVALID_REQUEST, "message": format!("Invalid Request: the body exceeds {max} bytes")}});
                let _ = lines.out.send(Bytes::from(e.to_string())).await;
                continue;
            }
        };
        lines.serve(line, &mut tasks, &mut in_flight);
    }
    // The client is gone (or the process was told to stop): every request not answered yet
    // is dropped, which cancels the runs they own, and the cancels are delivered before exit.
    let unanswered = in_flight.by_id.len();
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    if unanswered > 0 {
        tracing::info!(unanswered, "stdin closed: dropping the unanswered requests");
    }
    let _ = shutdown_tx.send(true);
    ctx.dispatcher
        .drain(ctx.cfg.ownership.cancel_deadline)
        .await;
    // The last sender: the writer ends once every answer queued before it is written.
    drop(lines);
    let _ = writer.await;
    Ok(())
}

/// What every line is served with.
struct Lines {
    ctx: Arc<McpContext>,
    uri: http::Uri,
    credential: Credential,
    session: Arc<Mutex<Option<Session>>>,
    out: mpsc::Sender<Bytes>,
}

impl Lines {
    /// Serves one line of stdin: a cancel of one of this process's requests here, anything
    /// else as a request to the mount, on a task of its own.
    fn serve(&self, line: Vec<u8>, tasks: &mut JoinSet<()>, in_flight: &mut InFlight) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        // A line that is not JSON is still the mount's to refuse (-32700 with id null): it
        // goes as it came, with the headers every message carries.
        let msg: Option<Map<String, Value>> = match serde_json::from_slice(&line) {
            Ok(Value::Object(m)) => Some(m),
            _ => None,
        };
        let method = msg
            .as_ref()
            .and_then(|m| m.get("method"))
            .and_then(Value::as_str);
        let id = msg
            .as_ref()
            .and_then(|m| m.get("id"))
            .filter(|i| !i.is_null());
        if method == Some("notifications/cancelled") && id.is_none() {
            // Served here, not by the mount: the request it names is one of this process's
            // tasks, and dropping it is what cancels its run (RFC 0198 §G.12). One already
            // answered is no longer in flight and keeps its run.
            let named = msg
                .as_ref()
                .and_then(|m| m.get("params"))
                .and_then(|p| p.get("requestId"))
                .and_then(id_key);
            if let Some(key) = named {
                in_flight.cancel(&key);
            }
            return;
        }
        let initialize = method == Some("initialize");
        let known_session = self
            .session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .filter(|_| !initialize);
        let headers = headers_for(
            msg.as_ref(),
            self.credential.header(),
            known_session.as_ref(),
        );
        let request_key = id.filter(|_| method.is_some()).and_then(id_key);
        let job = serve_line(
            self.ctx.clone(),
            self.uri.clone(),
            Bytes::from(line),
            headers,
            self.out.clone(),
            initialize.then(|| self.session.clone()),
        );
        let handle = tasks.spawn(job);
        if let Some(key) = request_key {
            in_flight.insert(key, handle);
        }
    }
}

/// The unanswered requests by id, so a cancel can drop one; `by_task` forgets an entry once
/// its task ended.
#[derive(Default)]
struct InFlight {
    by_id: HashMap<String, (tokio::task::Id, AbortHandle)>,
    by_task: HashMap<tokio::task::Id, String>,
}

impl InFlight {
    fn insert(&mut self, key: String, handle: AbortHandle) {
        self.by_task.insert(handle.id(), key.clone());
        self.by_id.insert(key, (handle.id(), handle));
    }

    /// A request's task ended: it was answered (or dropped) and can no longer be cancelled.
    fn ended(&mut self, tid: tokio::task::Id) {
        if let Some(key) = self.by_task.remove(&tid) {
            if self.by_id.get(&key).is_some_and(|(t, _)| *t == tid) {
                self.by_id.remove(&key);
            }
        }
    }

    /// Drops the unanswered request `key` names, which cancels the run it owns.
    fn cancel(&mut self, key: &str) {
        if let Some((tid, handle)) = self.by_id.remove(key) {
            self.by_task.remove(&tid);
            handle.abort();
        }
    }
}

/// The key a request id is found by: `1` and `"1"` are different requests.
fn id_key(id: &Value) -> Option<String> {
    (id.is_string() || id.is_i64() || id.is_u64()).then(|| id.to_string())
}

/// The headers the HTTP client of the same message would send.
fn headers_for(
    msg: Option<&Map<String, Value>>,
    authorization: Option<HeaderValue>,
    session: Option<&Session>,
) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(8);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // Both, JSON first: a quick answer comes whole, a long one streams (MCP 2026-07-28
    // Transports §Sending Messages to the Server).
    h.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    if let Some(a) = authorization {
        h.insert(header::AUTHORIZATION, a);
    }
    let Some(msg) = msg else { return h };
    let method = msg.get("method").and_then(Value::as_str);
    let params = msg.get("params").and_then(Value::as_object);
    let modern = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_VERSION));
    if let Some(version) = modern {
        // MCP 2026-07-28 "stdio: Backward Compatibility": the message carries its revision;
        // the headers mirror it and the body as an HTTP client's would.
        if let Some(v) = version.as_str().and_then(|v| HeaderValue::from_str(v).ok()) {
            h.insert(MCP_PROTOCOL_VERSION.clone(), v);
        }
        if let Some(m) = method {
            if let Ok(v) = HeaderValue::from_str(m) {
                h.insert(MCP_METHOD.clone(), v);
            }
            let mirrored = name_rule_of(Method::from_name(m), m)
                .and_then(|r| params.and_then(|p| p.get(r.member)))
                .and_then(Value::as_str);
            if let Some(name) = mirrored {
                h.insert(MCP_NAME.clone(), name_header(name));
            }
        }
    } else if let Some(s) = session {
        if let Ok(v) = HeaderValue::from_str(&s.revision) {
            h.insert(MCP_PROTOCOL_VERSION.clone(), v);
        }
        if let Some(v) = s.id.as_deref().and_then(|i| HeaderValue::from_str(i).ok()) {
            h.insert(MCP_SESSION_ID.clone(), v);
        }
    }
    h
}

/// `Mcp-Name` for `name`: as it is when it is plain visible ASCII, else in the base64 form
/// the mount decodes (MCP 2026-07-28 Transports §Request headers; src/mcp/envelope/).
fn name_header(name: &str) -> HeaderValue {
    let sentinel = name.starts_with("=?") && name.ends_with("?=");
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || b == b' ')
        && !name.starts_with(' ')
        && !name.ends_with(' ')
        && !sentinel;
    if plain {
        if let Ok(v) = HeaderValue::from_str(name) {
            return v;
        }
    }
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(name);
    HeaderValue::from_str(&format!("=?base64?{b64}?=")).unwrap_or(HeaderValue::from_static(""))
}

/// Serves one line: the mount's answer, written as lines: a JSON answer as one, an SSE
/// answer one per message (requests to the client and notifications as they come, then the
/// response), an empty answer (a notification, a response from the client) as none.
async fn serve_line(
    ctx: Arc<McpContext>,
    uri: http::Uri,
    line: Bytes,
    headers: HeaderMap,
    out: mpsc::Sender<Bytes>,
    session: Option<Arc<Mutex<Option<Session>>>>,
) {
    let mut req = Request::new(Full::new(line));
    *req.method_mut() = http::Method::POST;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    let resp = crate::stack::serve_mount(ctx, req).await;
    let (parts, mut body) = resp.into_parts();
    let sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
    if !sse {
        let bytes = match crate::body::whole(body).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "an answer could not be read");
                return;
            }
        };
        if bytes.is_empty() {
            return;
        }
        if let Some(session) = session {
            remember_session(&session, &parts.headers, &bytes);
        }
        let _ = out.send(one_line(bytes)).await;
        return;
    }
    // The mount's own frames: no bound is needed on an event's size.
    let mut parser = crate::sse::SseParser::new(usize::MAX);
    // The response is held until the body has ended: its guard is released with the last
    // frame (src/ownership.rs), so a line on stdout is always an answer the run is no longer
    // owned by.
    let mut response: Option<Bytes> = None;
    while let Some(frame) = body.frame().await {
        let data = match frame {
            Ok(f) => match f.into_data() {
                Ok(d) => d,
                Err(_) => continue,
            },
            Err(e) => {
                // Not delivered: the guard stays armed and cancels the run as this returns.
                tracing::warn!(error = %e, "an answer stream failed");
                return;
            }
        };
        let Ok(events) = parser.feed(&data) else {
            return;
        };
        for ev in events {
            if ev.data.is_empty() {
                continue;
            }
            let line = one_line(Bytes::from(ev.data));
            if let Some(previous) = response.take() {
                let _ = out.send(previous).await;
            }
            if is_response(&line) {
                response = Some(line);
            } else {
                let _ = out.send(line).await;
            }
        }
    }
    if let Some(r) = response {
        let _ = out.send(r).await;
    }
}

/// A JSON-RPC response (it has an id and no method).
fn is_response(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line)
        .is_ok_and(|v| v.get("method").is_none() && v.get("id").is_some())
}

/// `bytes` as one line: the mount writes compact JSON, which has no raw newline; anything else
/// is written again compactly.
fn one_line(bytes: Bytes) -> Bytes {
    if !bytes.contains(&b'\n') && !bytes.contains(&b'\r') {
        return bytes;
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => Bytes::from(v.to_string()),
        Err(_) => Bytes::from(
            String::from_utf8_lossy(&bytes)
                .replace(['\r', '\n'], " ")
                .into_bytes(),
        ),
    }
}

/// Keeps what a successful `initialize` answer negotiated.
fn remember_session(session: &Mutex<Option<Session>>, headers: &HeaderMap, body: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let Some(revision) = v
        .get("result")
        .and_then(|r| r.get("protocolVersion"))
        .and_then(Value::as_str)
    else {
        return;
    };
    let id = headers
        .get(&MCP_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    *session.lock().unwrap_or_else(|e| e.into_inner()) = Some(Session {
        revision: revision.to_string(),
        id,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modern_message_carries_the_headers_its_body_mirrors() {
        let m = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "grüße", "_meta": {META_VERSION: "2026-07-28"}}});
        let h = headers_for(m.as_object(), None, None);
        assert_eq!(h[&MCP_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(h[&MCP_METHOD], "tools/call");
        let name = h[&MCP_NAME].to_str().unwrap();
        assert!(name.starts_with("=?base64?"), "{name}");
        let plain = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "t-1", "_meta": {META_VERSION: "2026-07-28"}}});
        assert_eq!(headers_for(plain.as_object(), None, None)[&MCP_NAME], "t-1");
    }

    #[test]
    fn an_initialize_era_message_carries_the_negotiated_session() {
        let s = Session {
            revision: "2025-11-25".into(),
            id: Some("sess".into()),
        };
        let m = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let h = headers_for(m.as_object(), None, Some(&s));
        assert_eq!(h[&MCP_PROTOCOL_VERSION], "2025-11-25");
        assert_eq!(h[&MCP_SESSION_ID], "sess");
        assert!(h.get(&MCP_METHOD).is_none());
    }
}
