//! The `mount` section: where the MCP endpoint is served and who may call it.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{check_url, loc, Ctx};
use super::ConfigError;

pub const DEFAULT_PATH: &str = "/mcp";
pub const DEFAULT_ALLOWED_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];
pub const DEFAULT_DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(20);
pub const MIN_DEAD_PEER_TIMEOUT_MS: u64 = 1_000;

#[derive(Debug, Clone)]
pub struct Mount {
    pub path: String,
    /// Absolute URL advertised in `mcp.serverUrls`; when unset it is built from the request's
    /// `Host` header, but only for hosts named in `allowed_hosts` (never from an arbitrary Host).
    pub public_url: Option<String>,
    /// Names trusted for advertised URLs and same-machine Origins (src/mcp/origin.rs); with
    /// `enforce_host` also the only Hosts served.
    pub allowed_hosts: Vec<String>,
    /// Refuse any request whose Host is not `public_url`'s host or in `allowed_hosts`, with or
    /// without an Origin (default off: the Origin check is the DNS-rebinding defence).
    pub enforce_host: bool,
    /// Origins allowed to call the mount; a request whose `Origin` is not listed gets 403.
    pub allowed_origins: Vec<String>,
    /// How long unacknowledged data may wait before a silent peer counts as gone.
    pub dead_peer_timeout: Duration,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMount {
    #[schemars(with = "Option<String>")]
    pub path: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub public_url: Option<Spanned<String>>,
    pub allowed_hosts: Option<Vec<String>>,
    pub enforce_host: Option<bool>,
    pub allowed_origins: Option<Vec<String>>,
    #[schemars(with = "Option<u64>")]
    pub dead_peer_timeout_ms: Option<Spanned<u64>>,
}

impl RawMount {
    pub(super) fn normalise(self, cx: &Ctx) -> Result<Mount, ConfigError> {
        let path = match &self.path {
            Some(s) => {
                let p = s.value.trim_end_matches('/').to_string();
                if !p.starts_with('/') || p.len() < 2 || p.contains(['?', '#', ' ']) {
                    return Err(cx.err(
                        loc(s),
                        format!(
                            "mount.path: '{}' must be an absolute path like /mcp",
                            s.value
                        ),
                    ));
                }
                p
            }
            None => DEFAULT_PATH.to_string(),
        };
        let public_url = match &self.public_url {
            Some(s) => Some(
                check_url(&s.value).map_err(|m| cx.err(loc(s), format!("mount.publicUrl: {m}")))?,
            ),
            None => None,
        };
        Ok(Mount {
            path,
            public_url,
            allowed_hosts: self
                .allowed_hosts
                .unwrap_or_else(|| DEFAULT_ALLOWED_HOSTS.map(String::from).to_vec()),
            enforce_host: self.enforce_host.unwrap_or(false),
            allowed_origins: self.allowed_origins.unwrap_or_default(),
            dead_peer_timeout: match &self.dead_peer_timeout_ms {
                Some(s) if s.value < MIN_DEAD_PEER_TIMEOUT_MS => {
                    return Err(cx.err(loc(s), "mount.deadPeerTimeoutMs must be at least 1000"))
                }
                Some(s) => Duration::from_millis(s.value),
                None => DEFAULT_DEAD_PEER_TIMEOUT,
            },
        })
    }
}
