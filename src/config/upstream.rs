//! The `upstream` section: where the host is and how the sidecar's own calls reach it.

use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{check_url, loc, ms, Ctx};
use super::{ConfigError, Overrides};

pub const DEFAULT_URL: &str = "http://127.0.0.1:8787";
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(2_000);
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_millis(2_000);
pub const DEFAULT_HTTP2_MAX_STREAMS_PER_CONNECTION: usize = 100;

#[derive(Debug, Clone)]
pub struct Upstream {
    /// Base URL of the host, no trailing slash (`http://127.0.0.1:8787`).
    pub url: String,
    /// Extra CA bundle (PEM) trusted for an `https://` upstream.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS to the upstream.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    pub connect_timeout: Duration,
    /// Default per-request timeout of host API calls (not of passthrough streams).
    pub request_timeout: Duration,
    /// How long `/readyz` waits for the host's discovery document.
    pub ready_timeout: Duration,
    /// The sidecar's own host API calls go over HTTP/2 (src/host/h2pool.rs); passthrough
    /// traffic keeps HTTP/1.1.
    pub http2: bool,
    /// Streams per HTTP/2 connection before the pool opens another (at least 1).
    pub http2_max_streams_per_connection: usize,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawUpstream {
    #[schemars(with = "Option<String>")]
    pub url: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub ca_file: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub client_cert_file: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub client_key_file: Option<Spanned<String>>,
    pub connect_timeout_ms: Option<u64>,
    pub request_timeout_ms: Option<u64>,
    pub ready_timeout_ms: Option<u64>,
    /// Speak HTTP/2 to the host for the sidecar's own API calls (default false): h2c with
    /// prior knowledge for `http://`, ALPN `h2` for `https://`.
    pub http2: Option<bool>,
    /// Streams the HTTP/2 pool opens on one connection before it opens another (default 100,
    /// at least 1).
    #[schemars(with = "Option<u64>", range(min = 1))]
    pub http2_max_streams_per_connection: Option<Spanned<u64>>,
}

impl RawUpstream {
    pub(super) fn normalise(self, cx: &Ctx, ov: &Overrides) -> Result<Upstream, ConfigError> {
        let url = match (&ov.upstream, &self.url) {
            (Some(u), _) => check_url(u).map_err(|m| cx.err(None, format!("--upstream: {m}")))?,
            (None, Some(s)) => {
                check_url(&s.value).map_err(|m| cx.err(loc(s), format!("upstream.url: {m}")))?
            }
            (None, None) => DEFAULT_URL.to_string(),
        };
        let ca_file = match &self.ca_file {
            Some(s) => Some(cx.file(s, "upstream.caFile")?),
            None => None,
        };
        let client_cert = match (&self.client_cert_file, &self.client_key_file) {
            (Some(c), Some(k)) => Some((
                cx.file(c, "upstream.clientCertFile")?,
                cx.file(k, "upstream.clientKeyFile")?,
            )),
            (None, None) => None,
            (Some(s), None) | (None, Some(s)) => {
                return Err(cx.err(
                    loc(s),
                    "upstream.clientCertFile and upstream.clientKeyFile go together",
                ))
            }
        };
        Ok(Upstream {
            url,
            ca_file,
            client_cert,
            connect_timeout: ms(self.connect_timeout_ms, DEFAULT_CONNECT_TIMEOUT),
            request_timeout: ms(self.request_timeout_ms, DEFAULT_REQUEST_TIMEOUT),
            ready_timeout: ms(self.ready_timeout_ms, DEFAULT_READY_TIMEOUT),
            http2: self.http2.unwrap_or(false),
            http2_max_streams_per_connection: match &self.http2_max_streams_per_connection {
                Some(s) if s.value < 1 => {
                    return Err(cx.err(
                        loc(s),
                        "upstream.http2MaxStreamsPerConnection must be at least 1",
                    ))
                }
                Some(s) => usize::try_from(s.value).unwrap_or(usize::MAX),
                None => DEFAULT_HTTP2_MAX_STREAMS_PER_CONNECTION,
            },
        })
    }
}
