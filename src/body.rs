//! The response body type every route returns, and small constructors.

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Empty, Full};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = UnsyncBoxBody<Bytes, BoxError>;
pub type Response = http::Response<Body>;

pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A whole request body in one `Bytes`. A body that arrives as one frame (a JSON-RPC message
/// usually does) is that frame as it came; `BodyExt::collect` would first put it in a list of
/// its own (two allocations a request; issue 21). Trailers are dropped, as `to_bytes` drops
/// them.
pub async fn whole<B>(body: B) -> Result<Bytes, B::Error>
where
    B: http_body::Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    let mut first: Option<Bytes> = None;
    let mut joined: Option<bytes::BytesMut> = None;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        if let Some(j) = joined.as_mut() {
            j.extend_from_slice(&data);
        } else if let Some(f) = first.take() {
            let mut j = bytes::BytesMut::with_capacity(f.len() + data.len());
            j.extend_from_slice(&f);
            j.extend_from_slice(&data);
            joined = Some(j);
        } else {
            first = Some(data);
        }
    }
    Ok(joined
        .map(bytes::BytesMut::freeze)
        .or(first)
        .unwrap_or_default())
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
/// more per request, one beyond the allocator's per-thread cache (issue 21).
const HEAD_ROOM: usize = 12;

/// A `200` with `body` as `application/json`, its header map sized by [`HEAD_ROOM`].
pub fn json_response(body: Body) -> Response {
    let mut headers = http::HeaderMap::with_capacity(HEAD_ROOM);
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let mut r = http::Response::new(body);
    *r.headers_mut() = headers;
    r
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
