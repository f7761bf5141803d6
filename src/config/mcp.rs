//! The `mcp` section: what the mount advertises and how long its answers and requestStates live.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{loc, ms, Ctx};
use super::{ConfigError, Secret};

/// The one MCP revision this build serves.
pub const REVISION: &str = "2026-07-28";
pub const DEFAULT_REFRESHED_AT: &str = "2026-09-18";
pub const DEFAULT_SERVER_NAME: &str = "openwop-mcp-sidecar";
pub const DEFAULT_DISCOVER_TTL: Duration = Duration::from_millis(60_000);
pub const DEFAULT_TOOLS_LIST_TTL: Duration = Duration::from_millis(30_000);
/// The JSON window: the longest a blocking call whose client also accepts SSE goes without a
/// byte before the answer switches to SSE. Well under the 5 s read timeout of httpx (and so
/// of any Python client built on a default `httpx`/`httpx2` client), leaving room for the
/// run's creation at the host before the window starts.
pub const DEFAULT_JSON_ANSWER_CAP: Duration = Duration::from_millis(2_000);
pub const DEFAULT_SSE_ANSWER_CAP: Duration = Duration::from_millis(600_000);
pub const DEFAULT_TASK_IMMEDIATE_WINDOW: Duration = Duration::from_millis(300);
/// The gap between keep-alive comments on an open SSE answer or listen: under the 5 s read
/// timeout of a default httpx client with room to spare, so no such client ever reads
/// nothing for as long as it waits.
pub const DEFAULT_SSE_KEEPALIVE: Duration = Duration::from_millis(3_000);
pub const DEFAULT_MRTR_MAX_ROUNDS: u32 = 4;
pub const DEFAULT_REQUEST_STATE_TTL_SECONDS: u64 = 600;
/// Read when `mcp.requestStateKeyEnv` is not set.
pub const STATE_KEY_ENV: &str = "OPENWOP_SIDECAR_STATE_KEY";
/// The shortest requestState key accepted.
pub const MIN_STATE_KEY_BYTES: usize = 16;

/// The initialize-era revisions this build serves beside [`REVISION`] on the same endpoint
/// (MCP 2026-07-28 Versioning §Backward Compatibility with Initialization-Based Versions),
/// newest first: `initialize` falls back to the first one served.
pub const LEGACY_REVISIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// An `mcp.legacyRevisions` entry: one of [`LEGACY_REVISIONS`].
pub struct LegacyRevision;

impl JsonSchema for LegacyRevision {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "McpLegacyRevision".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "enum": LEGACY_REVISIONS })
    }
}

/// An `mcp.revisions` entry: the schema lists the one revision this build serves.
pub struct Revision;

impl JsonSchema for Revision {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "McpRevision".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "enum": [REVISION] })
    }
}

#[derive(Debug, Clone)]
pub struct Mcp {
    pub revisions: Vec<String>,
    /// The initialize-era revisions served (newest first; empty: 2026-07-28 only).
    pub legacy_revisions: Vec<&'static str>,
    pub refreshed_at: String,
    pub server_name: String,
    pub server_version: String,
    /// `mcp.instructions`; `None`: each era's built-in text.
    pub instructions: Option<String>,
    pub discover_ttl: Duration,
    pub tools_list_ttl: Duration,
    pub json_answer_cap: Duration,
    pub sse_answer_cap: Duration,
    /// A tasked `tools/call` whose run ends within this window is answered with the plain
    /// `CallToolResult` (RFC 0198 §B.4); zero always answers `CreateTaskResult`.
    pub task_immediate_window: Duration,
    pub sse_keepalive: Duration,
    pub mrtr_max_rounds: u32,
    pub request_state_ttl: Duration,
    /// HMAC key for requestState; `None` = a random per-process key (replicas can't share it).
    pub request_state_key: Option<Secret<Vec<u8>>>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMcp {
    #[schemars(with = "Option<Vec<Revision>>")]
    pub revisions: Option<Spanned<Vec<String>>>,
    /// The initialize-era revisions served beside 2026-07-28 (default: all three; `[]` turns
    /// the initialize handshake off).
    #[schemars(with = "Option<Vec<LegacyRevision>>")]
    pub legacy_revisions: Option<Spanned<Vec<String>>>,
    #[schemars(with = "Option<String>")]
    pub refreshed_at: Option<Spanned<String>>,
    pub server_name: Option<String>,
    /// The `instructions` text of `server/discover` and of the initialize-era `initialize`
    /// answer, for the model (default: a sentence about starting and tracking OpenWOP
    /// workflow runs, in each era's words for tasks). One text serves both eras.
    pub instructions: Option<String>,
    pub discover_ttl_ms: Option<u64>,
    pub tools_list_ttl_ms: Option<u64>,
    #[schemars(with = "Option<u64>")]
    pub json_answer_cap_ms: Option<Spanned<u64>>,
    #[schemars(with = "Option<u64>")]
    pub sse_answer_cap_ms: Option<Spanned<u64>>,
    /// How long a tasked tools/call waits for its run before answering CreateTaskResult.
    pub task_immediate_window_ms: Option<u64>,
    #[schemars(with = "Option<u64>")]
    pub sse_keepalive_ms: Option<Spanned<u64>>,
    #[schemars(with = "Option<u32>")]
    pub mrtr_max_rounds: Option<Spanned<u32>>,
    pub request_state_ttl_seconds: Option<u64>,
    /// Name of an environment variable holding the requestState HMAC key.
    pub request_state_key_env: Option<String>,
}

impl RawMcp {
    /// Each key read in turn, in the order its first error is reported.
    pub(super) fn normalise(self, cx: &Ctx) -> Result<Mcp, ConfigError> {
        let revisions = self.revisions(cx)?;
        let legacy_revisions = self.legacy_revisions(cx)?;
        let refreshed_at = self.refreshed_at(cx)?;
        let sse_keepalive = match &self.sse_keepalive_ms {
            Some(s) if s.value == 0 => {
                return Err(cx.err(loc(s), "mcp.sseKeepaliveMs must be at least 1"))
            }
            Some(s) => Duration::from_millis(s.value),
            None => DEFAULT_SSE_KEEPALIVE,
        };
        let mrtr_max_rounds = match &self.mrtr_max_rounds {
            Some(s) if !(1..=16).contains(&s.value) => {
                return Err(cx.err(
                    loc(s),
                    "mcp.mrtrMaxRounds must be 1..16 (OpenWOP v2 capabilities.md, getCapabilities facet)",
                ))
            }
            Some(s) => s.value,
            None => DEFAULT_MRTR_MAX_ROUNDS,
        };
        let (json_answer_cap, sse_answer_cap) = self.answer_caps(cx)?;
        let request_state_key = self.request_state_key(cx)?;
        Ok(Mcp {
            revisions,
            legacy_revisions,
            refreshed_at,
            server_name: self
                .server_name
                .unwrap_or_else(|| DEFAULT_SERVER_NAME.into()),
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            instructions: self.instructions,
            discover_ttl: ms(self.discover_ttl_ms, DEFAULT_DISCOVER_TTL),
            tools_list_ttl: ms(self.tools_list_ttl_ms, DEFAULT_TOOLS_LIST_TTL),
            json_answer_cap,
            sse_answer_cap,
            task_immediate_window: ms(self.task_immediate_window_ms, DEFAULT_TASK_IMMEDIATE_WINDOW),
            sse_keepalive,
            mrtr_max_rounds,
            request_state_ttl: Duration::from_secs(
                self.request_state_ttl_seconds
                    .unwrap_or(DEFAULT_REQUEST_STATE_TTL_SECONDS),
            ),
            request_state_key,
        })
    }

    /// `mcp.revisions`: exactly the one revision this build serves.
    fn revisions(&self, cx: &Ctx) -> Result<Vec<String>, ConfigError> {
        Ok(match &self.revisions {
            Some(s) => {
                if s.value.is_empty() || s.value.iter().any(|r| r != REVISION) {
                    return Err(cx.err(
                        loc(s),
                        "mcp.revisions: this build serves exactly [\"2026-07-28\"]",
                    ));
                }
                s.value.clone()
            }
            None => vec![REVISION.to_string()],
        })
    }

    /// `mcp.legacyRevisions`: initialize-era revisions this build serves, newest first.
    fn legacy_revisions(&self, cx: &Ctx) -> Result<Vec<&'static str>, ConfigError> {
        Ok(match &self.legacy_revisions {
            Some(s) => {
                if let Some(bad) = s
                    .value
                    .iter()
                    .find(|r| !LEGACY_REVISIONS.contains(&r.as_str()))
                {
                    return Err(cx.err(
                        loc(s),
                        format!(
                            "mcp.legacyRevisions: '{bad}' is not an initialize-era revision this build serves (any of {LEGACY_REVISIONS:?})"
                        ),
                    ));
                }
                // Kept newest first whatever the order written: negotiation falls back to the
                // newest one served.
                LEGACY_REVISIONS
                    .into_iter()
                    .filter(|r| s.value.iter().any(|v| v == r))
                    .collect()
            }
            None => LEGACY_REVISIONS.to_vec(),
        })
    }

    /// `mcp.refreshedAt`: a date like 2026-09-18.
    fn refreshed_at(&self, cx: &Ctx) -> Result<String, ConfigError> {
        Ok(match &self.refreshed_at {
            Some(s) => {
                let ok = time::Date::parse(
                    &s.value,
                    &time::macros::format_description!("[year]-[month]-[day]"),
                )
                .is_ok();
                if !ok {
                    return Err(cx.err(
                        loc(s),
                        format!(
                            "mcp.refreshedAt: '{}' is not a date like 2026-09-18",
                            s.value
                        ),
                    ));
                }
                s.value.clone()
            }
            None => DEFAULT_REFRESHED_AT.to_string(),
        })
    }

    /// `mcp.jsonAnswerCapMs` and `mcp.sseAnswerCapMs`, the JSON window no longer than the
    /// SSE cap.
    fn answer_caps(&self, cx: &Ctx) -> Result<(Duration, Duration), ConfigError> {
        let json_answer_cap = ms(
            self.json_answer_cap_ms.as_ref().map(|s| s.value),
            DEFAULT_JSON_ANSWER_CAP,
        );
        let sse_answer_cap = ms(
            self.sse_answer_cap_ms.as_ref().map(|s| s.value),
            DEFAULT_SSE_ANSWER_CAP,
        );
        if json_answer_cap > sse_answer_cap {
            // The one wait of a blocking call is bounded by the SSE cap (src/mcp/answer.rs):
            // a JSON window longer than it never ends in the switch to SSE it exists for.
            let shown = |s: &Option<Spanned<u64>>, d: Duration| match s {
                Some(s) => s.value.to_string(),
                None => format!("{}, the default", d.as_millis()),
            };
            let at = self
                .json_answer_cap_ms
                .as_ref()
                .or(self.sse_answer_cap_ms.as_ref());
            return Err(cx.err(
                at.and_then(loc),
                format!(
                    "mcp.jsonAnswerCapMs ({}) is longer than mcp.sseAnswerCapMs ({}): the JSON \
                     window must end before the SSE cap, or a blocking call never switches to SSE",
                    shown(&self.json_answer_cap_ms, DEFAULT_JSON_ANSWER_CAP),
                    shown(&self.sse_answer_cap_ms, DEFAULT_SSE_ANSWER_CAP),
                ),
            ));
        }
        Ok((json_answer_cap, sse_answer_cap))
    }

    /// The requestState key: `mcp.requestStateKeyEnv`'s variable, else `STATE_KEY_ENV`'s
    /// when it is long enough.
    fn request_state_key(&self, cx: &Ctx) -> Result<Option<Secret<Vec<u8>>>, ConfigError> {
        Ok(match &self.request_state_key_env {
            // Missing under check-config --allow-missing-env: no key stands in.
            Some(var) => {
                match super::env::var("mcp.requestStateKeyEnv", var).map_err(|m| cx.err(None, m))? {
                    Some(v) if v.len() >= MIN_STATE_KEY_BYTES => Some(Secret::new(v.into_bytes())),
                    Some(_) => {
                        return Err(cx.err(
                            None,
                            format!("mcp.requestStateKeyEnv: ${var} must hold at least 16 bytes"),
                        ))
                    }
                    None => None,
                }
            }
            None => std::env::var(STATE_KEY_ENV)
                .ok()
                .filter(|v| v.len() >= MIN_STATE_KEY_BYTES)
                .map(|v| Secret::new(v.into_bytes())),
        })
    }
}
