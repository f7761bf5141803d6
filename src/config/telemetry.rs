//! The `logging` and `telemetry` sections: log lines and OTLP span export.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{check_url, loc, word_at, Ctx};
use super::{ConfigError, Secret};

pub const DEFAULT_LOG_LEVEL: &str = "info";
pub const DEFAULT_SERVICE_NAME: &str = "openwop-mcp-sidecar";
pub const DEFAULT_SAMPLE_RATIO: f64 = 1.0;
pub const DEFAULT_OTLP_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const MIN_OTLP_TIMEOUT_MS: u64 = 100;

/// `logging.format`: one JSON object or one line of text per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LogFormat {
    Json,
    Text,
}

/// `logging.accessPaths`: how a passthrough access line writes the request path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AccessPaths {
    /// The path as the client sent it (never the query).
    #[default]
    Kept,
    /// Each segment that looks like an id (a digit other than in a `v1`-style version, an
    /// uppercase letter, any character but `a-z - _ .`, or over 40 characters) written as
    /// `{id}`; plain lowercase names (`runs`, `events`, `poll`) kept.
    Elided,
}

#[derive(Debug, Clone)]
pub struct Logging {
    pub level: String,
    pub json: bool,
    pub access_paths: AccessPaths,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Telemetry {
    pub otlp: Option<Otlp>,
}

/// OTLP/HTTP span export.
#[derive(Debug, Clone, PartialEq)]
pub struct Otlp {
    /// The full traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// Header values are often collector credentials (never in logs).
    pub headers: Vec<(String, Secret<String>)>,
    pub service_name: String,
    pub sample_ratio: f64,
    pub timeout: Duration,
    pub ca_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLogging {
    pub level: Option<String>,
    #[schemars(with = "Option<LogFormat>")]
    pub format: Option<Spanned<String>>,
    /// How passthrough access lines write the request path: `kept` (default) or `elided`
    /// (ids written `{id}`). The query is never written.
    #[schemars(with = "Option<AccessPaths>")]
    pub access_paths: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTelemetry {
    /// OTLP span export; absent means no export (spans stay in the logs only).
    pub otlp: Option<RawOtlp>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOtlp {
    /// The collector's OTLP/HTTP (protobuf) traces URL, path included:
    /// `http://otel-collector:4318/v1/traces`.
    #[schemars(with = "String")]
    pub endpoint: Spanned<String>,
    /// Extra request headers (for example a collector's API key). Values are never logged;
    /// `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`) adds headers from the environment.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub headers: Option<Spanned<BTreeMap<String, String>>>,
    /// `service.name` of the exported spans (default `openwop-mcp-sidecar`).
    pub service_name: Option<String>,
    /// Share of new traces recorded, 0.0 to 1.0 (default 1.0). A caller's sampled flag wins
    /// (parent-based sampling), so a trace the client records is recorded here too.
    #[schemars(with = "Option<f64>")]
    pub sample_ratio: Option<Spanned<f64>>,
    /// Per-export request timeout (default 10000).
    #[schemars(with = "Option<u64>")]
    pub timeout_ms: Option<Spanned<u64>>,
    /// Extra CA bundle (PEM) trusted for an `https://` endpoint.
    #[schemars(with = "Option<String>")]
    pub ca_file: Option<Spanned<String>>,
}

impl RawLogging {
    pub(super) fn normalise(self, cx: &Ctx) -> Result<Logging, ConfigError> {
        Ok(Logging {
            level: self.level.unwrap_or_else(|| DEFAULT_LOG_LEVEL.into()),
            json: word_at(cx, &self.format, "logging.format")? == Some(LogFormat::Json),
            access_paths: word_at(cx, &self.access_paths, "logging.accessPaths")?
                .unwrap_or_default(),
        })
    }
}

impl RawTelemetry {
    pub(super) fn normalise(self, cx: &Ctx) -> Result<Telemetry, ConfigError> {
        let Some(o) = &self.otlp else {
            return Ok(Telemetry { otlp: None });
        };
        let endpoint = check_url(&o.endpoint.value)
            .map_err(|m| cx.err(loc(&o.endpoint), format!("telemetry.otlp.endpoint: {m}")))?;
        let mut headers = Vec::new();
        if let Some(h) = &o.headers {
            for (k, v) in &h.value {
                if http::HeaderName::from_bytes(k.as_bytes()).is_err() {
                    return Err(cx.err(
                        loc(h),
                        format!("telemetry.otlp.headers: '{k}' is not a header name"),
                    ));
                }
                // The value may be a credential: name the header, never print it.
                if http::HeaderValue::from_str(v).is_err() {
                    return Err(cx.err(
                        loc(h),
                        format!("telemetry.otlp.headers: the value of '{k}' is not a valid header value"),
                    ));
                }
                headers.push((k.clone(), Secret::new(v.clone())));
            }
        }
        let sample_ratio = match &o.sample_ratio {
            Some(s) if !(0.0..=1.0).contains(&s.value) => {
                return Err(cx.err(
                    loc(s),
                    "telemetry.otlp.sampleRatio must be between 0.0 and 1.0",
                ))
            }
            Some(s) => s.value,
            None => DEFAULT_SAMPLE_RATIO,
        };
        let timeout = match &o.timeout_ms {
            Some(s) if s.value < MIN_OTLP_TIMEOUT_MS => {
                return Err(cx.err(loc(s), "telemetry.otlp.timeoutMs must be at least 100"))
            }
            Some(s) => Duration::from_millis(s.value),
            None => DEFAULT_OTLP_TIMEOUT,
        };
        let ca_file = match &o.ca_file {
            Some(s) => Some(cx.file(s, "telemetry.otlp.caFile")?),
            None => None,
        };
        Ok(Telemetry {
            otlp: Some(Otlp {
                endpoint,
                headers,
                service_name: o
                    .service_name
                    .clone()
                    .unwrap_or_else(|| DEFAULT_SERVICE_NAME.into()),
                sample_ratio,
                timeout,
                ca_file,
            }),
        })
    }
}
