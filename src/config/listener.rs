//! The `listen`, `tls`, `reload` and `shutdown` sections: how the sidecar's own listener
//! starts, reloads and drains.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{loc, ms, Ctx};
use super::{ConfigError, Overrides};

pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    8080,
));
pub const DEFAULT_RELOAD_POLL: Duration = Duration::from_millis(2_000);
pub const MIN_RELOAD_POLL_MS: u64 = 100;
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_millis(30_000);
pub const DEFAULT_LAME_DUCK: Duration = Duration::from_millis(6_000);

#[derive(Debug, Clone)]
pub struct Shutdown {
    pub drain_timeout: Duration,
    /// After SIGTERM, how long `/readyz` answers 503 while the listener keeps serving (and
    /// HTTP/1.1 answers carry `Connection: close`) before the drain begins.
    pub lame_duck: Duration,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTls {
    #[schemars(with = "String")]
    pub cert_file: Spanned<String>,
    #[schemars(with = "String")]
    pub key_file: Spanned<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawReload {
    #[schemars(with = "Option<u64>")]
    pub poll_interval_ms: Option<Spanned<u64>>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawShutdown {
    pub drain_timeout_ms: Option<u64>,
    pub lame_duck_ms: Option<u64>,
}

/// `listen`, the `--listen` flag winning.
pub(super) fn listen(
    cx: &Ctx,
    raw: &Option<Spanned<String>>,
    ov: &Overrides,
) -> Result<SocketAddr, ConfigError> {
    Ok(match (&ov.listen, raw) {
        (Some(a), _) => *a,
        (None, Some(s)) => s.value.parse().map_err(|_| {
            cx.err(
                loc(s),
                format!("listen: '{}' is not an address like 0.0.0.0:8080", s.value),
            )
        })?,
        (None, None) => DEFAULT_LISTEN,
    })
}

impl RawTls {
    pub(super) fn normalise(&self, cx: &Ctx) -> Result<(PathBuf, PathBuf), ConfigError> {
        Ok((
            cx.file(&self.cert_file, "tls.certFile")?,
            cx.file(&self.key_file, "tls.keyFile")?,
        ))
    }
}

impl RawReload {
    pub(super) fn normalise(&self, cx: &Ctx) -> Result<Duration, ConfigError> {
        Ok(match &self.poll_interval_ms {
            Some(s) if s.value < MIN_RELOAD_POLL_MS => {
                return Err(cx.err(loc(s), "reload.pollIntervalMs must be at least 100"))
            }
            Some(s) => Duration::from_millis(s.value),
            None => DEFAULT_RELOAD_POLL,
        })
    }
}

impl RawShutdown {
    pub(super) fn normalise(self) -> Shutdown {
        Shutdown {
            drain_timeout: ms(self.drain_timeout_ms, DEFAULT_DRAIN_TIMEOUT),
            lame_duck: ms(self.lame_duck_ms, DEFAULT_LAME_DUCK),
        }
    }
}
