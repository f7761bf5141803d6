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

pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// A JSON response with the given status.
pub fn json(status: http::StatusCode, v: &serde_json::Value) -> Response {
    let mut r = http::Response::new(full(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
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
