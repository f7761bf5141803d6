//! Response plumbing: the error envelope and JSON replies.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Empty, Full};
use serde_json::{json, Map, Value};

/// Error of a response body: only the fault switches produce one, to abort the
/// connection mid-body (see `faults`).
pub(crate) type BodyError = Box<dyn std::error::Error + Send + Sync>;

pub(crate) type Body = UnsyncBoxBody<Bytes, BodyError>;

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

pub(crate) fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// A buffered JSON (or empty) reply. Kept as plain data so idempotent operations can
/// cache and replay it byte for byte (OpenWOP v2 idempotency.md).
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Option<Bytes>,
}

impl Reply {
    pub(crate) fn json(status: u16, v: &Value) -> Reply {
        Reply {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            headers: Vec::new(),
            body: Some(Bytes::from(serde_json::to_vec(v).unwrap_or_default())),
        }
    }

    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Reply {
        if let Ok(v) = HeaderValue::from_str(value) {
            self.headers.push((HeaderName::from_static(name), v));
        }
        self
    }

    pub(crate) fn into_response(self) -> Response<Body> {
        let has_body = self.body.is_some();
        let mut resp = Response::new(match self.body {
            Some(b) => full(b),
            None => empty(),
        });
        *resp.status_mut() = self.status;
        let h = resp.headers_mut();
        if has_body {
            h.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        for (k, v) in self.headers {
            h.append(k, v);
        }
        resp
    }
}

/// The error envelope: exactly `{error, message, details?}` (OpenWOP v2 headers.md and errors.md).
/// Boxed so `Result<_, ApiError>` stays one pointer wide on the happy path.
#[derive(Debug, Clone)]
pub(crate) struct ApiError(Box<ErrorBody>);

#[derive(Debug, Clone)]
pub(crate) struct ErrorBody {
    status: u16,
    code: &'static str,
    message: String,
    details: Option<Map<String, Value>>,
    headers: Vec<(&'static str, String)>,
}

impl ApiError {
    pub(crate) fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        let mut message = message.into();
        if message.is_empty() {
            // The envelope requires a non-empty message.
            message = code.to_owned();
        }
        ApiError(Box::new(ErrorBody {
            status,
            code,
            message,
            details: None,
            headers: Vec::new(),
        }))
    }

    /// `400 validation_error` naming the offending field in `details.field`.
    pub(crate) fn validation(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, "validation_error", message).detail("field", json!(field))
    }

    pub(crate) fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(404, "not_found", message)
    }

    pub(crate) fn detail(mut self, key: &str, value: Value) -> ApiError {
        self.0
            .details
            .get_or_insert_with(Map::new)
            .insert(key.to_owned(), value);
        self
    }

    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> ApiError {
        self.0.headers.push((name, value.into()));
        self
    }

    pub(crate) fn into_reply(self) -> Reply {
        let e = *self.0;
        let mut body = Map::new();
        body.insert("error".into(), json!(e.code));
        body.insert("message".into(), json!(e.message));
        if let Some(d) = e.details {
            body.insert("details".into(), Value::Object(d));
        }
        let mut reply = Reply::json(e.status, &Value::Object(body));
        for (k, v) in &e.headers {
            reply = reply.header(k, v);
        }
        reply
    }
}

/// Parse a request body that must be a JSON object (empty allowed when `optional`).
pub(crate) fn json_object(body: &[u8], optional: bool) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        if optional {
            return Ok(Map::new());
        }
        return Err(ApiError::validation(
            "body",
            "a JSON object body is required",
        ));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::validation(
            "body",
            "the body must be a JSON object",
        )),
        Err(e) => Err(ApiError::validation(
            "body",
            format!("the body is not valid JSON: {e}"),
        )),
    }
}

/// Closed bodies (`unevaluatedProperties: false`): the first unknown key is a
/// `400 validation_error` with `details.field` (OpenWOP v2 runs.md, createRun).
pub(crate) fn closed(obj: &Map<String, Value>, allowed: &[&str]) -> Result<(), ApiError> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::validation(k, format!("unknown field {k}"))),
        None => Ok(()),
    }
}
