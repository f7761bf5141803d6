//! Writing answers: JSON, or an SSE stream scoped to the request (MCP 2026-07-28 Transports §Sending Messages).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use http_body::{Body as HttpBody, Frame};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use super::{McpError, META_SERVER_INFO};
use crate::body::{full, BoxError, Response};
use crate::config::Config;
use crate::json::scan::write_str;
use crate::ownership::RunGuard;

/// Adds `_meta.serverInfo` (MCP 2026-07-28 Basic §_meta: servers SHOULD put it in every result).
pub fn with_server_info(cfg: &Config, mut result: Value) -> Value {
    if let Some(o) = result.as_object_mut() {
        let meta = o.entry("_meta").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.insert(META_SERVER_INFO.into(), super::server_info(cfg));
        }
    }
    result
}

pub fn envelope_result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

pub fn envelope_error(id: &Value, e: &McpError) -> Value {
    let error = e.to_error_object();
    if let Some(code) = error["code"].as_i64() {
        crate::access::rpc_error(code);
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// A JSON result (HTTP 200), with serverInfo.
pub fn result_response(cfg: &Config, id: &Value, result: Value) -> Response {
    match result.as_object() {
        // The common case, written straight out: the same bytes as the `Value` path below.
        Some(o) if !o.contains_key("_meta") => object_result_response(cfg, id, &result),
        _ => crate::body::json(
            StatusCode::OK,
            &envelope_result(id, with_server_info(cfg, result)),
        ),
    }
}

/// A JSON result (HTTP 200) whose `result` is `object` with `_meta.serverInfo` appended, written
/// without building a `Value` of the answer. `object` must serialize as a JSON object with no
/// `_meta` member; the bytes are those `result_response` writes for the same object (compact
/// serde_json, members in order, `_meta` last).
pub fn object_result_response<T: serde::Serialize + ?Sized>(
    cfg: &Config,
    id: &Value,
    object: &T,
) -> Response {
    // Writing a `Value` or a derived struct into a Vec cannot fail.
    object_result_response_with(cfg, id, |out| {
        let _ = serde_json::to_writer(out, object);
    })
}

/// [`object_result_response`] whose object `write` appends (the bytes serde_json would write
/// for it: `DetailedTask::write_json`).
pub fn object_result_response_with(
    cfg: &Config,
    id: &Value,
    write: impl FnOnce(&mut Vec<u8>),
) -> Response {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(br#","result":"#);
    let start = out.len();
    write(&mut out);
    debug_assert!(out.len() >= start + 2 && out[start] == b'{' && out.ends_with(b"}"));
    out.pop();
    if out.len() > start + 1 {
        out.push(b',');
    }
    // The strings as serde_json writes them, without its per-character escaping pass for the
    // (plain) text of every answer.
    out.extend_from_slice(br#""_meta":{"#);
    write_str(&mut out, META_SERVER_INFO);
    out.extend_from_slice(br#":{"name":"#);
    write_str(&mut out, &cfg.mcp.server_name);
    out.extend_from_slice(br#","version":"#);
    write_str(&mut out, &cfg.mcp.server_version);
    out.extend_from_slice(b"}}}}");
    crate::body::json_response(full(out))
}

/// A JSON result exactly as given (acks that must carry nothing else).
pub fn bare_result_response(id: &Value, result: Value) -> Response {
    crate::body::json(StatusCode::OK, &envelope_result(id, result))
}

/// A JSON-RPC error object as given (HTTP 200), e.g. a host fault's `-32603`.
pub fn json_rpc_error(id: &Value, error: Value) -> Response {
    crate::body::json(
        StatusCode::OK,
        &json!({ "jsonrpc": "2.0", "id": id, "error": error }),
    )
}

/// A JSON-RPC error with its HTTP status and headers.
pub fn error_response(id: &Value, e: &McpError) -> Response {
    let id = if e.echoes_id() { id } else { &Value::Null };
    let mut r = crate::body::json(e.http_status(), &envelope_error(id, e));
    for (k, v) in e.headers() {
        r.headers_mut().insert(k, v);
    }
    r
}

/// A JSON answer that completes ownership only when its last byte is handed over.
pub fn guarded_json(message: &Value, guard: RunGuard) -> Response {
    guarded_bytes(serde_json::to_vec(message).unwrap_or_default(), guard)
}

/// [`guarded_json`] for a message already written.
pub fn guarded_bytes(message: Vec<u8>, guard: RunGuard) -> Response {
    let body = crate::ownership::guarded(full(message), guard);
    crate::body::json_response(body.boxed_unsync())
}

/// An SSE body whose frames come from a stream polled by the connection itself (a listen
/// that follows tasks): the stream ends the body, and dropping the body (the client went
/// away) drops the stream and runs the close callback.
pub struct FramesBody {
    // First field, so the bookkeeping is released before the stream is dropped (fields drop
    // in order), as for every other stream.
    _on_close: OnClose,
    frames: Pin<Box<dyn futures_util::Stream<Item = Bytes> + Send>>,
}

impl FramesBody {
    pub fn new(
        frames: Pin<Box<dyn futures_util::Stream<Item = Bytes> + Send>>,
        on_close: Box<dyn FnOnce() + Send>,
    ) -> FramesBody {
        FramesBody {
            frames,
            _on_close: OnClose(Some(on_close)),
        }
    }
}

// Hand-written: http-body-util's StreamBody would still need this wrapper to drop the close
// guard before the stream, and WithEos (src/eos.rs) runs its handler at the end, not at the drop.
impl HttpBody for FramesBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.frames
            .as_mut()
            .poll_next(cx)
            .map(|f| f.map(|b| Ok(Frame::data(b))))
    }
}

/// Runs its callback once when the response body is dropped: hyper drops the body when the
/// client goes away or the stream ends, which is when a stream's bookkeeping must be released.
struct OnClose(Option<Box<dyn FnOnce() + Send>>);

impl Drop for OnClose {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Frames a blocking call's future queues for its own stream before the result
/// (`notifications/progress`, MCP 2026-07-28 Transports §Sending Messages). Advisory: when `NOTES_MAX` are waiting for a
/// slow reader, a new one is dropped rather than stall the run.
#[derive(Default)]
pub struct Notes(std::sync::Mutex<std::collections::VecDeque<Bytes>>);

const NOTES_MAX: usize = 8;

impl Notes {
    pub fn push(&self, frame: Bytes) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() < NOTES_MAX {
            q.push_back(frame);
        }
    }

    fn pop(&self) -> Option<Bytes> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
    }
}

/// The SSE answer of a blocking `tools/call`, driven by the connection that carries it: the
/// future that follows the run and yields the final frame is polled by the body itself, with
/// a keep-alive at once and then every `period` while it waits and the progress notes it queues sent first.
/// No task and no channel per call: a call blocked on a long run costs only this body and its
/// future (10,000 blocked calls). When the client goes away hyper drops the body,
/// and with it the future; the [`GuardedBody`] around it then cancels the run it owns
/// (RFC 0198 §G.12), exactly as for a dropped request.
pub struct AnswerBody {
    _on_close: OnClose,
    answer: Option<Pin<Box<dyn std::future::Future<Output = Bytes> + Send>>>,
    last: Option<Bytes>,
    notes: std::sync::Arc<Notes>,
    keepalive: tokio::time::Interval,
    done: bool,
}

impl AnswerBody {
    pub fn new(
        answer: Pin<Box<dyn std::future::Future<Output = Bytes> + Send>>,
        notes: std::sync::Arc<Notes>,
        period: std::time::Duration,
        on_close: Box<dyn FnOnce() + Send>,
    ) -> AnswerBody {
        // The first comment goes out with the head: a client (or proxy) that waits for the
        // first body byte with a read timeout starts its clock on the stream, not on the
        // silent JSON window before it.
        let start = tokio::time::Instant::now();
        AnswerBody {
            answer: Some(answer),
            last: None,
            notes,
            keepalive: tokio::time::interval_at(start, period),
            done: false,
            _on_close: OnClose(Some(on_close)),
        }
    }
}

// Hand-written: one poll interleaves the answer future, the queued notes and the keep-alive
// timer, which no http-body-util combinator or WithEos (src/eos.rs) expresses.
impl HttpBody for AnswerBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(f) = self.answer.as_mut() {
            if let Poll::Ready(last) = f.as_mut().poll(cx) {
                self.answer = None;
                self.last = Some(last);
            }
        }
        // Notes queued before the answer settled go out before it (MCP 2026-07-28 Transports §Sending Messages:
        // progress precedes the result on the request's stream).
        if let Some(note) = self.notes.pop() {
            return Poll::Ready(Some(Ok(Frame::data(note))));
        }
        if let Some(last) = self.last.take() {
            self.done = true;
            return Poll::Ready(Some(Ok(Frame::data(last))));
        }
        match self.keepalive.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(Frame::data(crate::sse::keepalive_frame())))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

impl AnswerBody {
    /// The answer body of a stream that holds `slot` of `limits.maxStreams`: counted as an
    /// open stream (`metrics`) until the body is dropped, which also frees the slot.
    pub fn on_slot(
        ctx: &super::McpContext,
        slot: tokio::sync::OwnedSemaphorePermit,
        answer: Pin<Box<dyn std::future::Future<Output = Bytes> + Send>>,
        notes: std::sync::Arc<Notes>,
    ) -> AnswerBody {
        let metrics = ctx.metrics.clone();
        metrics.stream_opened();
        AnswerBody::new(
            answer,
            notes,
            ctx.cfg.mcp.sse_keepalive,
            Box::new(move || {
                drop(slot);
                metrics.stream_closed();
            }),
        )
    }
}

/// SSE response head: flushed at once so a client sees the stream start (OpenWOP conformance v2-mcp-tasks T13).
pub fn sse_response<B>(body: B) -> Response
where
    B: HttpBody<Data = Bytes, Error = BoxError> + Send + 'static,
{
    let mut r = http::Response::new(body.boxed_unsync());
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    // MCP 2026-07-28 Transports §Sending Messages: SHOULD send X-Accel-Buffering: no on SSE responses.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// The body of a listen that follows no task: its first frame (the acknowledgement), then a
/// keep-alive every `period` until the client goes away; when the sidecar shuts down, `last`
/// (the listen's result) and the end of the stream. It needs no task and no channel: the
/// connection polls it, so an idle listen costs only this struct and its two timers
/// (10,000 open listens in ≤ 100 MB).
pub struct KeepaliveBody {
    _on_close: OnClose,
    first: Option<Bytes>,
    last: Option<Bytes>,
    keepalive: tokio::time::Interval,
    shutdown: tokio_stream::wrappers::WatchStream<bool>,
    done: bool,
}

impl KeepaliveBody {
    pub fn new(
        first: Bytes,
        last: Bytes,
        period: std::time::Duration,
        shutdown: tokio::sync::watch::Receiver<bool>,
        on_close: Box<dyn FnOnce() + Send>,
    ) -> KeepaliveBody {
        let start = tokio::time::Instant::now() + period;
        KeepaliveBody {
            first: Some(first),
            last: Some(last),
            keepalive: tokio::time::interval_at(start, period),
            shutdown: tokio_stream::wrappers::WatchStream::new(shutdown),
            done: false,
            _on_close: OnClose(Some(on_close)),
        }
    }
}

// Hand-written: the keep-alive timer and the shutdown watch race between a first and a last
// frame, which no http-body-util combinator or WithEos (src/eos.rs) expresses.
impl HttpBody for KeepaliveBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        use tokio_stream::Stream;
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(b) = self.first.take() {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        // Shutdown first: a listen ends with its result, never with a cut (RFC 0198 §G.14).
        loop {
            match Pin::new(&mut self.shutdown).poll_next(cx) {
                // The stream yields the current value first; only `true` means shutdown.
                Poll::Ready(Some(false)) => continue,
                Poll::Ready(Some(true)) | Poll::Ready(None) => {
                    self.done = true;
                    let last = self.last.take().unwrap_or_default();
                    return Poll::Ready(Some(Ok(Frame::data(last))));
                }
                Poll::Pending => break,
            }
        }
        match self.keepalive.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(Frame::data(crate::sse::keepalive_frame())))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn bytes(r: Response) -> Vec<u8> {
        r.into_body().collect().await.unwrap().to_bytes().to_vec()
    }

    #[tokio::test]
    async fn a_result_written_directly_is_byte_identical_to_the_value_path() {
        let mut cfg = Config::defaults();
        cfg.mcp.server_name = "side\"car/é\n".into();
        for result in [
            json!({}),
            json!({"resultType":"complete"}),
            json!({"b":1,"a":{"z":[1,"x"],"y":null},"resultType":"complete"}),
            json!({"_meta":{"k":"v"},"resultType":"complete"}),
        ] {
            for id in [json!(1), json!("a\"b"), Value::Null] {
                let expected = serde_json::to_vec(&envelope_result(
                    &id,
                    with_server_info(&cfg, result.clone()),
                ))
                .unwrap();
                let r = result_response(&cfg, &id, result.clone());
                assert_eq!(r.status(), StatusCode::OK);
                assert_eq!(r.headers()[http::header::CONTENT_TYPE], "application/json");
                assert_eq!(
                    String::from_utf8(bytes(r).await).unwrap(),
                    String::from_utf8(expected).unwrap()
                );
            }
        }
    }
}
