//! What a failed host call means: refused, timed out, an error answer (classified by the
//! configured rules) or a damaged one.

use std::time::Duration;

use http::{header, HeaderMap, HeaderValue, StatusCode};

use crate::config::{ErrorClass, Operation};

/// A failed host call, keeping what the error mapping needs (status, OpenWOP error code,
/// challenge headers) and nothing it must not leak.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    #[error("the host is unreachable: {0}")]
    Unavailable(String),
    #[error("the host did not answer in time")]
    Timeout,
    #[error("the host answered {status} {code:?}")]
    Status {
        status: StatusCode,
        code: Option<String>,
        message: Option<String>,
        www_authenticate: Option<HeaderValue>,
        retry_after: Option<HeaderValue>,
        /// What the configured error rules say this answer means.
        class: ErrorClass,
    },
    #[error("the host sent a body that is not what its API promises: {0}")]
    BadBody(String),
    /// Nothing was sent: the call lacks a value the request is built from (an allowed
    /// header, a caller value; src/host/fill.rs): the caller's mistake, `-32602`, or for a
    /// credential without a caller value the 401 challenge (src/mcp/error.rs).
    #[error("{0}")]
    NotSent(super::fill::Missing),
}

impl HostError {
    /// The pause a refusal asked for: its `Retry-After` (RFC 9110 §10.2.3; a 429 or a 503
    /// usually), delay-seconds or an HTTP-date.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            HostError::Status {
                retry_after: Some(v),
                ..
            } => retry_after_value(v),
            _ => None,
        }
    }

    pub fn status(&self) -> Option<StatusCode> {
        match self {
            HostError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
    pub fn code(&self) -> Option<&str> {
        match self {
            HostError::Status { code, .. } => code.as_deref(),
            _ => None,
        }
    }
    /// The class of a host answer; transport faults are internal.
    pub fn class(&self) -> ErrorClass {
        match self {
            HostError::Status { class, .. } => *class,
            _ => ErrorClass::Internal,
        }
    }
    /// Transport faults and 5xx may be retried on safe or idempotency-keyed operations.
    /// Whether `op` may be sent again after this failure (on a route marked retryable).
    /// Refused connections, damaged answers and 5xx are worth another try; a timeout only
    /// where the request is idempotency-keyed (createRun): there a repeat is how the sidecar
    /// learns the id of a run the host may already have created (OpenWOP v2 idempotency.md), while
    /// elsewhere it would only multiply a slow host's latency.
    pub(super) fn retriable(&self, op: Operation) -> bool {
        match self {
            HostError::Unavailable(_) | HostError::BadBody(_) => true,
            // A route may say a 5xx means the run has already ended: nothing to repeat.
            HostError::Status { status, class, .. } => {
                status.is_server_error() && !class.run_is_terminal()
            }
            HostError::Timeout => op == Operation::CreateRun,
            HostError::NotSent(_) => false,
        }
    }

    /// The host may have acted on the request although no usable answer came back: it timed
    /// out after the request was sent, or the answer broke off or was damaged. A refused
    /// connection or an error status is an answer: nothing was done.
    pub fn ambiguous(&self) -> bool {
        matches!(self, HostError::Timeout | HostError::BadBody(_))
    }
}

/// The innermost cause (`Connection refused`, a TLS alert, …): the outer layers only say
/// "client error", and nothing of the request (URL, credential) is ever part of it.
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(s) = last.source() {
        last = s;
    }
    last.to_string()
}

/// A request that cannot be put on the wire, refused before anything is sent.
#[derive(Debug)]
pub(super) enum BadTarget {
    /// A target that is not a valid URI, a header value with control bytes (logged where it
    /// is found, src/host/client.rs). The loader checks the route templates and ids are
    /// projected (a `raw` id is sent as the host wrote it), so this is not expected.
    Wire,
    /// The call lacks a value a template needs (a `{header.NAME}` the request did not carry,
    /// a `{caller.NAME}` its credential has none of): the caller's mistake, named.
    Caller(super::fill::Missing),
}

impl BadTarget {
    /// A template of `op` that could not be filled: the caller's mistake is named to it
    /// (a debug line only), anything else is a warning.
    pub(super) fn unfilled(op: Operation, m: &super::fill::Missing) -> BadTarget {
        if m.is_callers() {
            crate::access::in_request(|| {
                tracing::debug!(operation = op.key(), "host request not sent: {m}")
            });
            BadTarget::Caller(m.clone())
        } else {
            crate::access::in_request(|| {
                tracing::warn!(operation = op.key(), "host request not sent: {m}")
            });
            BadTarget::Wire
        }
    }
}

impl From<BadTarget> for HostError {
    fn from(b: BadTarget) -> HostError {
        match b {
            BadTarget::Wire => {
                HostError::Unavailable("the request cannot be put on the wire".into())
            }
            BadTarget::Caller(m) => HostError::NotSent(m),
        }
    }
}

pub use crate::obs::HOST_TARGET;

/// Logs a host call that failed as a host fault (unreachable, timed out, a damaged answer, a
/// 5xx or an answer the error rules class as internal): the route, its method and the path
/// without its query (query values may carry what the caller sent), and the error. Refusals
/// the caller is told about (401, 404, 4xx rules) are not faults and stay at `debug`.
pub(super) fn host_failure(op: Operation, method: &http::Method, path: &str, e: &HostError) {
    let fault = match e {
        HostError::Status { status, .. } => status.is_server_error() || e.class().is_host_fault(),
        _ => true,
    };
    crate::obs::access::in_request(|| {
        if fault {
            tracing::warn!(target: HOST_TARGET, route = op.key(), %method, path, error = %e, "host call failed");
        } else {
            tracing::debug!(target: HOST_TARGET, route = op.key(), %method, path, error = %e, "host call refused");
        }
    })
}

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date; a date in the past is 0.
pub fn retry_after(h: &HeaderMap) -> Option<Duration> {
    retry_after_value(h.get(header::RETRY_AFTER)?)
}

/// [`retry_after`] of the header's value (a refusal keeps the value it was sent with).
pub fn retry_after_value(v: &http::HeaderValue) -> Option<Duration> {
    let v = v.to_str().ok()?.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    let at = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc2822).ok()?;
    let left = at - time::OffsetDateTime::now_utc();
    Some(Duration::try_from(left).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::RETRY_AFTER, v.parse().unwrap());
        h
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        assert_eq!(retry_after(&with("2")), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(&with("0")), Some(Duration::ZERO));
        assert_eq!(
            retry_after(&with("Sun, 06 Nov 1994 08:49:37 GMT")),
            Some(Duration::ZERO),
            "a past date"
        );
        let later = time::OffsetDateTime::now_utc() + time::Duration::seconds(30);
        let text = later
            .format(&time::format_description::well_known::Rfc2822)
            .unwrap();
        let got = retry_after(&with(&text)).unwrap();
        assert!(
            got > Duration::from_secs(25) && got <= Duration::from_secs(30),
            "{got:?}"
        );
        assert_eq!(retry_after(&with("soon")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }
}
