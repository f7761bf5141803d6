//! Every MCP error in one place: what it means, and the one function that turns it into
//! (HTTP status, JSON-RPC code, message, data, metric label). Host errors map into it here,
//! never ad hoc in handlers (docs/architecture.md, Errors).

use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};

use crate::config::ErrorClass;
use crate::host::HostError;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const HEADER_MISMATCH: i64 = -32020;
pub const MISSING_CAPABILITY: i64 = -32021;
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// An error answered on the MCP mount.
#[derive(Debug, Clone)]
pub enum McpError {
    /// Body is not JSON (400, -32700).
    Parse,
    /// Not a single JSON-RPC request object (400, -32600).
    InvalidRequest(String),
    /// A required `_meta` field is missing (400, -32602; MCP conformance `sep-2575-http-server-meta-invalid-400`).
    MetaMissing(String),
    /// Header/body disagreement (400, -32020).
    HeaderMismatch(String),
    /// Revision not served (400, -32022).
    UnsupportedVersion {
        requested: Option<String>,
        supported: Vec<String>,
    },
    /// Unknown method (404, -32601).
    MethodNotFound(String),
    /// A client capability the method needs was not declared (400, -32021).
    MissingCapability(Value),
    /// Invalid params, unknown tool, bad arguments, refused requestState (200, -32602).
    InvalidParams(String),
    /// A task the caller cannot read: byte-identical for every cause (RFC 0208 §C).
    TaskNotFound,
    /// Internal failure; the message never carries upstream bodies (200, -32603).
    Internal,
    /// The caller must authenticate: HTTP 401 with the host's challenge.
    Unauthorized {
        www_authenticate: Option<HeaderValue>,
    },
    /// The caller's token lacks scope: HTTP 403 with the host's challenge so clients step up.
    InsufficientScope { www_authenticate: HeaderValue },
    /// The host is shedding load: HTTP 429 with its Retry-After.
    RateLimited { retry_after: Option<HeaderValue> },
    /// A foreign Origin (403).
    ForbiddenOrigin,
    /// A Host outside the allow-list while `mount.enforceHost` is on (403).
    ForbiddenHost,
    /// The sidecar is at its configured concurrency (`limits.maxConcurrentRequests`, or
    /// `limits.maxStreams` for a listen): 503 with `Retry-After: 1`. Answered with
    /// `id: null` wherever it is raised (see [`McpError::echoes_id`]).
    Overloaded,
}

impl McpError {
    pub fn http_status(&self) -> StatusCode {
        match self {
            McpError::Parse
            | McpError::InvalidRequest(_)
            | McpError::MetaMissing(_)
            | McpError::HeaderMismatch(_)
            | McpError::UnsupportedVersion { .. }
            | McpError::MissingCapability(_) => StatusCode::BAD_REQUEST,
            McpError::MethodNotFound(_) => StatusCode::NOT_FOUND,
            McpError::InvalidParams(_) | McpError::TaskNotFound | McpError::Internal => {
                StatusCode::OK
            }
            McpError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            McpError::InsufficientScope { .. }
            | McpError::ForbiddenOrigin
            | McpError::ForbiddenHost => StatusCode::FORBIDDEN,
            McpError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            McpError::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            McpError::Parse => "parse_error",
            McpError::InvalidRequest(_) => "invalid_request",
            McpError::MetaMissing(_) => "meta_missing",
            McpError::HeaderMismatch(_) => "header_mismatch",
            McpError::UnsupportedVersion { .. } => "unsupported_version",
            McpError::MethodNotFound(_) => "method_not_found",
            McpError::MissingCapability(_) => "missing_capability",
            McpError::InvalidParams(_) => "invalid_params",
            McpError::TaskNotFound => "task_not_found",
            McpError::Internal => "internal_error",
            McpError::Unauthorized { .. } => "unauthorized",
            McpError::InsufficientScope { .. } => "insufficient_scope",
            McpError::RateLimited { .. } => "rate_limited",
            McpError::ForbiddenOrigin => "forbidden_origin",
            McpError::ForbiddenHost => "forbidden_host",
            McpError::Overloaded => "shed",
        }
    }

    /// The JSON-RPC error object.
    pub fn to_error_object(&self) -> Value {
        let (code, message, data): (i64, String, Option<Value>) = match self {
            McpError::Parse => (
                PARSE_ERROR,
                "Parse error: the body is not JSON".into(),
                None,
            ),
            McpError::InvalidRequest(m) => (INVALID_REQUEST, format!("Invalid Request: {m}"), None),
            // MCP 2026-07-28 Versioning: a legacy-shaped request (e.g. an old client's `initialize`)
            // is refused naming the versions this server speaks, so the client can tell why.
            McpError::MetaMissing(m) => (
                INVALID_PARAMS,
                format!("{m} (this server speaks MCP 2026-07-28 without initialize; start with server/discover)"),
                Some(json!({ "supported": ["2026-07-28"] })),
            ),
            McpError::HeaderMismatch(m) => (HEADER_MISMATCH, format!("Header mismatch: {m}"), None),
            McpError::UnsupportedVersion {
                requested,
                supported,
            } => (
                UNSUPPORTED_VERSION,
                "Unsupported protocol version".into(),
                Some(json!({ "supported": supported, "requested": requested })),
            ),
            McpError::MethodNotFound(m) => {
                (METHOD_NOT_FOUND, format!("Method not found: {m}"), None)
            }
            McpError::MissingCapability(caps) => (
                MISSING_CAPABILITY,
                "Missing required client capability".into(),
                Some(json!({ "requiredCapabilities": caps })),
            ),
            McpError::InvalidParams(m) => (INVALID_PARAMS, m.clone(), None),
            McpError::TaskNotFound => (INVALID_PARAMS, "task not found".into(), None),
            McpError::Internal => (
                INTERNAL_ERROR,
                "the host failed to serve the request".into(),
                None,
            ),
            McpError::Unauthorized { .. } => {
                (INVALID_REQUEST, "authentication required".into(), None)
            }
            McpError::InsufficientScope { .. } => {
                (INVALID_REQUEST, "insufficient scope".into(), None)
            }
            McpError::RateLimited { .. } => (
                INTERNAL_ERROR,
                "the host is rate limiting; retry later".into(),
                None,
            ),
            McpError::ForbiddenOrigin => (INVALID_REQUEST, "Origin not allowed".into(), None),
            McpError::ForbiddenHost => (INVALID_REQUEST, "Host not allowed".into(), None),
            McpError::Overloaded => (
                INTERNAL_ERROR,
                "the sidecar is at capacity; retry later".into(),
                None,
            ),
        };
        let mut o = json!({ "code": code, "message": message });
        if let Some(d) = data {
            o["data"] = d;
        }
        o
    }

    /// HTTP headers the error carries (challenges, Retry-After).
    pub fn headers(&self) -> Vec<(http::HeaderName, HeaderValue)> {
        match self {
            McpError::Unauthorized { www_authenticate } => vec![(
                http::header::WWW_AUTHENTICATE,
                www_authenticate
                    .clone()
                    .unwrap_or_else(|| HeaderValue::from_static("Bearer")),
            )],
            McpError::InsufficientScope { www_authenticate } => {
                vec![(http::header::WWW_AUTHENTICATE, www_authenticate.clone())]
            }
            McpError::RateLimited {
                retry_after: Some(r),
            } => vec![(http::header::RETRY_AFTER, r.clone())],
            McpError::Overloaded => {
                vec![(http::header::RETRY_AFTER, HeaderValue::from_static("1"))]
            }
            _ => vec![],
        }
    }

    /// Whether the answer carries the request's id. A shed answer is the same bytes whichever
    /// gate refused: the server's request gate refuses before the body is read, so it has no
    /// id to echo, and the mount's stream gate answers alike.
    pub fn echoes_id(&self) -> bool {
        !matches!(self, McpError::Overloaded)
    }

    /// Maps a host failure through its configured class (host.errors rules; the defaults are
    /// RFC 0208, transport envelope: ≥500 → -32603 generic; not-yours → -32602; 401 and 403
    /// `insufficient_scope` pass through as HTTP; 429 passes through with Retry-After).
    pub fn from_host(e: &HostError) -> McpError {
        match e {
            HostError::Status {
                status,
                www_authenticate,
                retry_after,
                message,
                class,
                ..
            } => match class {
                ErrorClass::PassThrough => match status.as_u16() {
                    401 => McpError::Unauthorized {
                        www_authenticate: www_authenticate.clone(),
                    },
                    429 => McpError::RateLimited {
                        retry_after: retry_after.clone(),
                    },
                    403 => McpError::InsufficientScope {
                        www_authenticate: www_authenticate.clone().unwrap_or_else(|| {
                            HeaderValue::from_static("Bearer error=\"insufficient_scope\"")
                        }),
                    },
                    _ if status.is_server_error() => McpError::Internal,
                    _ => McpError::InvalidParams(host_message(message, *status)),
                },
                ErrorClass::Internal => McpError::Internal,
                ErrorClass::NotFound
                | ErrorClass::InvalidParams
                | ErrorClass::ToolError
                | ErrorClass::Terminal => McpError::InvalidParams(host_message(message, *status)),
            },
            HostError::Unavailable(_) | HostError::Timeout | HostError::BadBody(_) => {
                McpError::Internal
            }
            HostError::NotSent(m) => McpError::from_missing(m),
        }
    }

    /// A host request the call could not build (src/host/fill.rs). A value the call itself
    /// lacks (an argument, an allowed header) is its `-32602`, named. A credential that
    /// `host.templates.callerValues` binds no value to is one the mount cannot act under:
    /// answered as the host answers a credential it refuses, HTTP 401 with a Bearer
    /// challenge (RFC 6750 §3; the mount adds `resource_metadata`, src/auth.rs), so an
    /// OAuth client is prompted to log in (MCP 2026-07-28 "Authorization") instead of being
    /// told its request was malformed. `invalid_token` only when a credential was sent
    /// (RFC 6750 §3.1: a request without one gets no error code).
    pub fn from_missing(m: &crate::host::Missing) -> McpError {
        match m {
            crate::host::Missing::Caller {
                name,
                presented: true,
            } => McpError::Unauthorized {
                // RFC 6750 §3: error_description is %x20-21 / %x23-5B / %x5D-7E; the name is a
                // config key (checked by the loader), so this is a valid header value.
                www_authenticate: HeaderValue::from_str(&format!(
                    "Bearer error=\"invalid_token\", error_description=\"no value for \
                     caller.{name} is bound to this credential\""
                ))
                .ok(),
            },
            crate::host::Missing::Caller { .. } => McpError::Unauthorized {
                www_authenticate: None,
            },
            // The operator's mapping failed, not the call: the caller learns nothing of the
            // mapping; the log names the key, where it is written and jq's error.
            crate::host::Missing::Expr(e) => {
                tracing::warn!(target: crate::obs::HOST_TARGET, "mapping expression failed: {e}");
                McpError::Internal
            }
            other => McpError::InvalidParams(other.to_string()),
        }
    }

    /// Maps a failed read of a task: everything the caller may not see is "task not found";
    /// only authentication, scope step-up, rate limits and host faults stay distinct.
    pub fn from_host_task_read(e: &HostError) -> McpError {
        // A read the call could not even build (it lacks an allowed header or a caller value)
        // says nothing about the task: it is named as the caller's mistake.
        if let HostError::NotSent(m) = e {
            return McpError::from_missing(m);
        }
        match McpError::from_host(e) {
            McpError::InvalidParams(_) => McpError::TaskNotFound,
            other => other,
        }
    }
}

fn host_message(message: &Option<String>, status: StatusCode) -> String {
    message
        .clone()
        .unwrap_or_else(|| format!("the host refused the request ({status})"))
}

/// A 403 whose challenge says `insufficient_scope` is a step-up signal, not "not yours".
pub fn scope_challenge(status: StatusCode, www: Option<&HeaderValue>) -> Option<HeaderValue> {
    if status != StatusCode::FORBIDDEN {
        return None;
    }
    let w = www?;
    w.to_str()
        .ok()
        .filter(|s| s.contains("insufficient_scope"))?;
    Some(w.clone())
}
