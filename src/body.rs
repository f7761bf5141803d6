//! The response body type every route returns, and small constructors.

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Empty, Full};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = UnsyncBoxBody<Bytes, BoxError>;
pub type Response = http::Response<Body>;
/// What every service of the request path answers: a response, never an error.
pub type Answer = Result<Response, std::convert::Infallible>;
/// A boxed answer future: the type at the stack's boundaries (src/stack/), which the mount's
/// `crate::mcp::serve` returns too.
pub type BoxAnswer = std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send>>;

/// The largest block glibc's per-thread cache (tcache) serves: 1,032 bytes on 64-bit
/// (glibc `malloc/malloc.c`, `MAX_TCACHE_SIZE`). A bigger one is allocated and freed under
/// the arena's lock, where the workers meet.
pub const THREAD_CACHE_MAX: usize = 1032;

/// `fut` boxed, for a future that is boxed once per request: the mount's and the host call's
/// boundaries (docs/benchmarks.md, Decisions: every per-request box within the thread cache).
/// In a release build a future larger than [`THREAD_CACHE_MAX`] is named once, at `warn`,
/// with the place that boxes it, and `openwop-bench` fails on that line. The size is a
/// constant of the type, so within the cache the check compiles to nothing. A debug build's
/// futures are several times larger and are not checked.
#[track_caller]
#[inline]
pub fn per_request<F: std::future::Future>(fut: F) -> std::pin::Pin<Box<F>> {
    if cfg!(not(debug_assertions)) && std::mem::size_of::<F>() > THREAD_CACHE_MAX {
        oversized(std::mem::size_of::<F>(), std::panic::Location::caller());
    }
    Box::pin(fut)
}

/// What `openwop-bench` looks for in the sidecar's log.
pub const OVERSIZED_LINE: &str = "a per-request future is boxed beyond glibc's per-thread cache";

#[cold]
#[inline(never)]
fn oversized(bytes: usize, at: &'static std::panic::Location<'static>) {
    static NAMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !NAMED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!(
            bytes,
            cache_max = THREAD_CACHE_MAX,
            at = %at,
            "{OVERSIZED_LINE}: every request allocates it under the allocator's arena lock"
        );
    }
}

pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A whole request body in one `Bytes`. A body that arrives as one frame (a JSON-RPC message
/// usually does) is that frame as it came; `BodyExt::collect` would first put it in a list of
/// its own (two allocations a request). Trailers are dropped, as `to_bytes` drops them.
pub fn whole<B>(body: B) -> Whole<B>
where
    B: http_body::Body<Data = Bytes>,
{
    Whole {
        body,
        first: None,
        joined: None,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`whole`]: a named type, so that a tower layer can hold it in its own
    /// future without a box (src/stack/read_body.rs).
    pub struct Whole<B> {
        #[pin]
        body: B,
        first: Option<Bytes>,
        joined: Option<bytes::BytesMut>,
    }
}

impl<B> std::future::Future for Whole<B>
where
    B: http_body::Body<Data = Bytes>,
{
    type Output = Result<Bytes, B::Error>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let mut this = self.project();
        while let Some(frame) = std::task::ready!(this.body.as_mut().poll_frame(cx)) {
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            if let Some(j) = this.joined.as_mut() {
                j.extend_from_slice(&data);
            } else if let Some(f) = this.first.take() {
                let mut j = bytes::BytesMut::with_capacity(f.len() + data.len());
                j.extend_from_slice(&f);
                j.extend_from_slice(&data);
                *this.joined = Some(j);
            } else {
                *this.first = Some(data);
            }
        }
        std::task::Poll::Ready(Ok(this
            .joined
            .take()
            .map(bytes::BytesMut::freeze)
            .or(this.first.take())
            .unwrap_or_default()))
    }
}

pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// A JSON response with the given status.
pub fn json(status: http::StatusCode, v: &serde_json::Value) -> Response {
    let mut r = json_response(full(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = status;
    r
}

/// Header fields a JSON answer's map has room for.
///
/// An HTTP/1.1 connection parses the next request into the header map of the answer it just
/// wrote (hyper keeps it, emptied, for that). An answer's map made for its one
/// `Content-Type` holds six fields, and an MCP request brings eight or more (`Host`,
/// `Content-Type`, `Accept`, `Content-Length`, `Authorization`, `MCP-Protocol-Version`,
/// `Mcp-Method`, …), so every request on a kept-alive connection grew it: two allocations
/// more per request, one beyond the allocator's per-thread cache.
const HEAD_ROOM: usize = 12;

/// A `200` with `body` as `application/json`, its header map sized by [`HEAD_ROOM`].
pub fn json_response(body: Body) -> Response {
    let mut headers = spare_headers();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let mut r = http::Response::new(body);
    *r.headers_mut() = headers;
    r
}

/// The most header maps a thread keeps for reuse ([`recycle_headers`]).
const SPARE_MAX: usize = 4;

/// A map that can hold more fields than this is not kept: one grown by a request with many
/// fields would hold its memory for every later answer.
const SPARE_ROOM_MAX: usize = 64;

thread_local! {
    /// Emptied header maps of requests and host answers this thread has read, for the next
    /// answer or host request it builds.
    static SPARE: std::cell::RefCell<Vec<http::HeaderMap>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty header map with room for [`HEAD_ROOM`] fields: one this thread kept
/// ([`recycle_headers`]), or a new one.
///
/// hyper parses the next message of a connection into the map of the message it just wrote
/// (the answer's on the MCP connection, the host request's on the host connection), and the
/// map it parsed into is dropped once its fields are read. Every `tasks/get` therefore made
/// two maps (two allocations each, beyond the allocator's per-thread cache, and freed on
/// whichever worker the next message was read) and dropped two. Handing each map
/// it drops to the next one it makes keeps those maps in use instead, as a proxy that moves
/// one message's map into the next does.
pub fn spare_headers() -> http::HeaderMap {
    SPARE
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
        .ok()
        .flatten()
        .unwrap_or_else(|| http::HeaderMap::with_capacity(HEAD_ROOM))
}

/// Keeps `headers`, emptied, for [`spare_headers`]: a map with room for [`HEAD_ROOM`] to
/// [`SPARE_ROOM_MAX`] fields, while this thread keeps fewer than [`SPARE_MAX`]. Any other is
/// dropped.
pub fn recycle_headers(mut headers: http::HeaderMap) {
    if !(HEAD_ROOM..=SPARE_ROOM_MAX).contains(&headers.capacity()) {
        return;
    }
    headers.clear();
    let _ = SPARE.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            if s.len() < SPARE_MAX {
                s.push(headers);
            }
        }
    });
}

/// An OpenWOP-style error envelope (OpenWOP v2 headers.md and errors.md: exactly error, message, details?).
pub fn openwop_error(status: http::StatusCode, code: &str, message: &str) -> Response {
    let mut r = json(
        status,
        &serde_json::json!({ "error": code, "message": message }),
    );
    r.headers_mut()
        .insert("openwop-version", http::HeaderValue::from_static("2.0"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&'static str]) -> impl http_body::Body<Data = Bytes, Error = BoxError> {
        let frames: Vec<Result<http_body::Frame<Bytes>, BoxError>> = parts
            .iter()
            .map(|p| Ok(http_body::Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect();
        http_body_util::StreamBody::new(futures_util::stream::iter(frames))
    }

    /// A kept map comes back empty (no field of the request it held reaches an answer), with
    /// its room; one grown beyond [`SPARE_ROOM_MAX`] or one too small is not kept, nor more
    /// than [`SPARE_MAX`].
    #[test]
    fn a_recycled_header_map_comes_back_empty_and_only_a_few_are_kept() {
        let mut h = http::HeaderMap::with_capacity(HEAD_ROOM);
        h.insert(
            http::header::AUTHORIZATION,
            "Bearer secret".parse().unwrap(),
        );
        h.append(http::header::ACCEPT, "a".parse().unwrap());
        h.append(http::header::ACCEPT, "b".parse().unwrap());
        let room = h.capacity();
        recycle_headers(h);
        let again = spare_headers();
        assert!(again.is_empty());
        assert_eq!(again.capacity(), room);
        let answer = json_response(full("{}"));
        assert_eq!(answer.headers().len(), 1);
        assert!(answer.headers().get(http::header::AUTHORIZATION).is_none());

        let kept = || SPARE.with(|s| s.borrow().len());
        recycle_headers(http::HeaderMap::with_capacity(200));
        recycle_headers(http::HeaderMap::new());
        assert_eq!(kept(), 0);
        for _ in 0..SPARE_MAX + 3 {
            recycle_headers(http::HeaderMap::with_capacity(HEAD_ROOM));
        }
        assert_eq!(kept(), SPARE_MAX);
        // A fresh map when none is kept has the room an MCP request needs.
        while kept() > 0 {
            spare_headers();
        }
        assert!(spare_headers().capacity() >= HEAD_ROOM);
    }

    #[tokio::test]
    async fn a_body_is_read_whole_however_it_is_framed() {
        let one = Bytes::from_static(b"{\"jsonrpc\":\"2.0\"}");
        let got = whole(Full::new(one.clone())).await.unwrap();
        // The one frame itself, not a copy.
        assert_eq!(got.as_ptr(), one.as_ptr());
        assert_eq!(
            whole(frames(&["{\"a\"", ":", "1}"])).await.unwrap(),
            "{\"a\":1}"
        );
        assert_eq!(whole(frames(&[])).await.unwrap(), "");
        let over = http_body_util::Limited::new(frames(&["12345", "678"]), 6);
        assert!(whole(over)
            .await
            .unwrap_err()
            .is::<http_body_util::LengthLimitError>());
    }
}
