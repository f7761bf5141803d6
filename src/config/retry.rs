//! `host.routes.<op>.retry`: which failed host calls are sent again, how often and after what
//! pause (src/host/retry.rs applies it). `true` or `false` as before, or an object:
//!
//! ```yaml
//! host:
//!   routes:
//!     getRun:
//!       retry: { statuses: [502, 503], attempts: 3, backoffMs: 100, retryAfterMaxMs: 2000 }
//! ```

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

/// The quick retries of a retriable failure wait 50 ms, then 100 ms (docs/faults.md).
const BACKOFF: Duration = Duration::from_millis(50);
/// Attempts in all of a route that retries (one call and two repeats).
const ATTEMPTS: u32 = 3;
/// The longest `Retry-After` waited out inside a call: a longer pause is the caller's to wait
/// (a blocking call's follow waits it out up to its answer cap, src/mcp/follow.rs; a task
/// poll passes it on to the client).
const RETRY_AFTER_MAX: Duration = Duration::from_millis(100);

/// The raw form: a switch, or the policy's parts.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawRetry {
    /// `true`: the default policy; `false`: never sent again.
    On(bool),
    Policy(RawRetryPolicy),
}

/// `retry` as written: `true`, `false` or a policy, refused at its own line otherwise.
pub fn read(
    v: &serde_saphyr::Spanned<serde_json::Value>,
) -> Result<RawRetry, (Option<(u64, u64)>, String)> {
    let at = Some((v.referenced.line(), v.referenced.column()));
    match &v.value {
        serde_json::Value::Bool(on) => Ok(RawRetry::On(*on)),
        o @ serde_json::Value::Object(_) => serde_json::from_value(o.clone())
            .map(RawRetry::Policy)
            .map_err(|e| (at, e.to_string())),
        _ => Err((
            at,
            "use true, false or a policy {statuses, attempts, backoffMs, retryAfterMaxMs}".into(),
        )),
    }
}

/// See [`RetryPolicy`]; each key left out keeps its default.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRetryPolicy {
    /// The HTTP statuses sent again (default: any 5xx). Unreachable hosts and broken answers
    /// are always retriable; a timeout only for an idempotency-keyed createRun.
    pub statuses: Option<Vec<u16>>,
    /// Attempts in all, the first included (default 3; 1 never repeats).
    pub attempts: Option<u32>,
    /// The pause before the n-th repeat is n × this (default 50).
    pub backoff_ms: Option<u64>,
    /// On a read (GET or HEAD), a 429 or 503 whose `Retry-After` asks for at most this long
    /// is waited out and sent again (default 100); a longer pause is the caller's.
    pub retry_after_max_ms: Option<u64>,
}

/// How a route's failed calls are sent again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    pub backoff: Duration,
    /// `None`: any 5xx.
    pub statuses: Option<Vec<http::StatusCode>>,
    pub retry_after_max: Duration,
}

impl RetryPolicy {
    /// The default of a route that retries.
    pub fn on() -> RetryPolicy {
        RetryPolicy {
            attempts: ATTEMPTS,
            backoff: BACKOFF,
            statuses: None,
            retry_after_max: RETRY_AFTER_MAX,
        }
    }

    /// A route that never sends a call again.
    pub fn off() -> RetryPolicy {
        RetryPolicy {
            attempts: 1,
            ..RetryPolicy::on()
        }
    }

    /// Whether a failed call may be sent again at all.
    pub fn enabled(&self) -> bool {
        self.attempts > 1
    }

    /// The policy `raw` asks for over the route's default (`default_on`).
    pub fn from_raw(raw: Option<&RawRetry>, default_on: bool) -> Result<RetryPolicy, String> {
        let base = if default_on {
            RetryPolicy::on()
        } else {
            RetryPolicy::off()
        };
        let p = match raw {
            None => return Ok(base),
            Some(RawRetry::On(true)) => return Ok(RetryPolicy::on()),
            Some(RawRetry::On(false)) => return Ok(RetryPolicy::off()),
            Some(RawRetry::Policy(p)) => p,
        };
        let statuses = match &p.statuses {
            None => None,
            Some(list) => Some(
                list.iter()
                    .map(|s| {
                        http::StatusCode::from_u16(*s)
                            .ok()
                            .filter(|c| c.is_client_error() || c.is_server_error())
                            .ok_or_else(|| format!("statuses: {s} is not a 4xx or 5xx status"))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let attempts = p.attempts.unwrap_or(ATTEMPTS);
        if !(1..=10).contains(&attempts) {
            return Err(format!("attempts: {attempts} is not between 1 and 10"));
        }
        Ok(RetryPolicy {
            attempts,
            backoff: p.backoff_ms.map_or(BACKOFF, Duration::from_millis),
            statuses,
            retry_after_max: p
                .retry_after_max_ms
                .map_or(RETRY_AFTER_MAX, Duration::from_millis),
        })
    }

    /// Whether an answer with `status` is sent again (transport failures are decided by the
    /// error itself, src/host/error.rs).
    pub fn retries_status(&self, status: http::StatusCode) -> bool {
        match &self.statuses {
            Some(list) => list.contains(&status),
            None => status.is_server_error(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(yaml: &str) -> RawRetry {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn a_route_retry_is_a_switch_or_a_policy_with_todays_defaults() {
        assert_eq!(
            RetryPolicy::from_raw(None, true).unwrap(),
            RetryPolicy::on()
        );
        assert_eq!(
            RetryPolicy::from_raw(None, false).unwrap(),
            RetryPolicy::off()
        );
        assert_eq!(
            RetryPolicy::from_raw(Some(&raw("false")), true).unwrap(),
            RetryPolicy::off()
        );
        let p = RetryPolicy::from_raw(
            Some(&raw("{statuses: [502, 503], attempts: 4, backoffMs: 10}")),
            false,
        )
        .unwrap();
        assert_eq!(p.attempts, 4);
        assert_eq!(p.backoff, Duration::from_millis(10));
        assert!(p.retries_status(http::StatusCode::BAD_GATEWAY));
        assert!(!p.retries_status(http::StatusCode::INTERNAL_SERVER_ERROR));
        assert_eq!(p.retry_after_max, RETRY_AFTER_MAX);
        assert!(RetryPolicy::from_raw(Some(&raw("{statuses: [200]}")), true).is_err());
        assert!(RetryPolicy::from_raw(Some(&raw("{attempts: 0}")), true).is_err());
        assert!(serde_saphyr::from_str::<RawRetry>("{tries: 2}").is_err());
    }
}
