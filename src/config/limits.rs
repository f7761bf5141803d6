//! The `limits` section: bounds that keep one client, or many, from exhausting the sidecar.
//! Each setting has a default and a floor.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{loc, Ctx};
use super::ConfigError;

/// `(default, least accepted)` of each limit.
pub const MAX_BODY_BYTES: (u64, u64) = (4 << 20, 1024);
pub const MAX_JSON_DEPTH: (u64, u64) = (64, 8);
pub const MAX_CONCURRENT_REQUESTS: (u64, u64) = (8192, 1);
pub const MAX_STREAMS: (u64, u64) = (20_000, 1);
pub const HEADER_READ_TIMEOUT_MS: (u64, u64) = (10_000, 100);
pub const BODY_READ_TIMEOUT_MS: (u64, u64) = (30_000, 100);
pub const MAX_UPSTREAM_EVENT_BYTES: (u64, u64) = (1 << 20, 1024);

/// Bounds that keep one client, or many, from exhausting the sidecar.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest MCP request body (413 beyond it).
    pub max_body_bytes: usize,
    /// Deepest JSON nesting accepted in an MCP request (-32600 beyond it).
    pub max_json_depth: usize,
    /// Requests in flight at once; beyond it new ones are shed with 503 and Retry-After.
    pub max_concurrent_requests: usize,
    /// SSE answers and listen streams open at once; beyond it 503 and Retry-After.
    pub max_streams: usize,
    /// Time a client gets to send its request head (slow clients cannot pin connections).
    pub header_read_timeout: Duration,
    /// Time a client gets to send an MCP request body.
    pub body_read_timeout: Duration,
    /// Largest single event accepted on a host event stream.
    pub max_upstream_event_bytes: usize,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLimits {
    #[schemars(with = "Option<u64>")]
    pub max_body_bytes: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub max_json_depth: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub max_concurrent_requests: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub max_streams: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub header_read_timeout_ms: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub body_read_timeout_ms: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub max_upstream_event_bytes: Option<Spanned<u64>>,
}

impl RawLimits {
    pub(super) fn normalise(&self, cx: &Ctx) -> Result<Limits, ConfigError> {
        let at_least = |v: &Option<Spanned<u64>>,
                        (default, min): (u64, u64),
                        what: &str|
         -> Result<u64, ConfigError> {
            match v {
                Some(s) if s.value < min => {
                    Err(cx.err(loc(s), format!("limits.{what} must be at least {min}")))
                }
                Some(s) => Ok(s.value),
                None => Ok(default),
            }
        };
        Ok(Limits {
            max_body_bytes: at_least(&self.max_body_bytes, MAX_BODY_BYTES, "maxBodyBytes")?
                as usize,
            max_json_depth: at_least(&self.max_json_depth, MAX_JSON_DEPTH, "maxJsonDepth")?
                as usize,
            max_concurrent_requests: at_least(
                &self.max_concurrent_requests,
                MAX_CONCURRENT_REQUESTS,
                "maxConcurrentRequests",
            )? as usize,
            max_streams: at_least(&self.max_streams, MAX_STREAMS, "maxStreams")? as usize,
            header_read_timeout: Duration::from_millis(at_least(
                &self.header_read_timeout_ms,
                HEADER_READ_TIMEOUT_MS,
                "headerReadTimeoutMs",
            )?),
            body_read_timeout: Duration::from_millis(at_least(
                &self.body_read_timeout_ms,
                BODY_READ_TIMEOUT_MS,
                "bodyReadTimeoutMs",
            )?),
            max_upstream_event_bytes: at_least(
                &self.max_upstream_event_bytes,
                MAX_UPSTREAM_EVENT_BYTES,
                "maxUpstreamEventBytes",
            )? as usize,
        })
    }
}
