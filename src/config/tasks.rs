//! The `tasks` section (the MCP Tasks extension) and the `ownership` section (orphaned runs).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{loc, ms, Ctx};
use super::ConfigError;

pub const DEFAULT_POLL_INTERVAL_MS: u64 = 500;
pub const DEFAULT_MAX_LISTEN_TASK_IDS: usize = 100;
pub const DEFAULT_LISTEN_POLL_INTERVAL: Duration = Duration::from_millis(500);
pub const DEFAULT_CANCEL_DEADLINE: Duration = Duration::from_millis(30_000);
/// The reason a cancel of an orphaned run carries.
pub const CANCEL_REASON: &str = "mcp-request-cancelled";

#[derive(Debug, Clone)]
pub struct Tasks {
    pub enabled: bool,
    pub poll_interval_ms: u64,
    pub max_listen_task_ids: usize,
    pub listen_poll_interval: Duration,
    /// `tasks/get` asks the host `If-None-Match` with the ETag of the run document it read
    /// last for the same caller, and a `304` reuses that document (src/host/revalidate.rs).
    pub revalidate: bool,
}

#[derive(Debug, Clone)]
pub struct Ownership {
    /// How long the sidecar keeps retrying the cancel of an orphaned run.
    pub cancel_deadline: Duration,
    pub cancel_reason: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTasks {
    pub enabled: Option<bool>,
    #[schemars(with = "Option<u64>")]
    pub poll_interval_ms: Option<Spanned<u64>>,
    pub max_listen_task_ids: Option<usize>,
    pub listen_poll_interval_ms: Option<u64>,
    pub revalidate: Option<bool>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOwnership {
    pub cancel_deadline_ms: Option<u64>,
}

impl RawTasks {
    pub(super) fn normalise(self, cx: &Ctx) -> Result<Tasks, ConfigError> {
        Ok(Tasks {
            enabled: self.enabled.unwrap_or(true),
            poll_interval_ms: match &self.poll_interval_ms {
                Some(s) if s.value == 0 => {
                    return Err(cx.err(
                        loc(s),
                        "tasks.pollIntervalMs must be a positive integer (ext-tasks §TTL)",
                    ))
                }
                Some(s) => s.value,
                None => DEFAULT_POLL_INTERVAL_MS,
            },
            max_listen_task_ids: self
                .max_listen_task_ids
                .unwrap_or(DEFAULT_MAX_LISTEN_TASK_IDS),
            listen_poll_interval: ms(self.listen_poll_interval_ms, DEFAULT_LISTEN_POLL_INTERVAL),
            revalidate: self.revalidate.unwrap_or(true),
        })
    }
}

impl RawOwnership {
    pub(super) fn normalise(self) -> Ownership {
        Ownership {
            cancel_deadline: ms(self.cancel_deadline_ms, DEFAULT_CANCEL_DEADLINE),
            cancel_reason: CANCEL_REASON.into(),
        }
    }
}
