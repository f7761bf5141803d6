//! The YAML file as written by an operator. Every struct refuses unknown keys, so a typo is
//! an error with a line and column instead of a silently ignored setting.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::routes::{parse_template, Operation, Route, Routes};
use super::*;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConfig {
    #[schemars(with = "Option<String>")]
    pub listen: Option<Spanned<String>>,
    #[serde(default)]
    pub upstream: RawUpstream,
    #[serde(default)]
    pub mount: RawMount,
    #[serde(default)]
    pub mcp: RawMcp,
    #[serde(default)]
    pub tasks: RawTasks,
    #[serde(default)]
    pub ownership: RawOwnership,
    #[serde(default)]
    pub shutdown: RawShutdown,
    #[serde(default)]
    pub host: RawHost,
    #[serde(default)]
    pub tools: RawTools,
    #[serde(default)]
    pub logging: RawLogging,
    #[serde(default)]
    pub telemetry: RawTelemetry,
    #[serde(default)]
    pub reload: RawReload,
    pub tls: Option<RawTls>,
    #[serde(default)]
    pub limits: RawLimits,
    /// Login discovery for MCP clients (off when absent; src/config/auth.rs).
    pub auth: Option<super::auth::RawAuth>,
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

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMcp {
    #[schemars(with = "Option<Vec<String>>")]
    pub revisions: Option<Spanned<Vec<String>>>,
    #[schemars(with = "Option<String>")]
    pub refreshed_at: Option<Spanned<String>>,
    pub server_name: Option<String>,
    pub discover_ttl_ms: Option<u64>,
    pub tools_list_ttl_ms: Option<u64>,
    pub json_answer_cap_ms: Option<u64>,
    pub sse_answer_cap_ms: Option<u64>,
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

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTasks {
    pub enabled: Option<bool>,
    #[schemars(with = "Option<u64>")]
    pub poll_interval_ms: Option<Spanned<u64>>,
    pub max_listen_task_ids: Option<usize>,
    pub listen_poll_interval_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawOwnership {
    pub cancel_deadline_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawShutdown {
    pub drain_timeout_ms: Option<u64>,
    pub lame_duck_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHost {
    #[serde(default)]
    pub routes: RawRoutes,
    #[serde(default)]
    pub ids: super::mapping::RawIds,
    #[serde(default)]
    pub fields: super::mapping::RawFields,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub statuses: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub bodies: super::mapping::RawBodies,
    #[serde(default)]
    pub errors: Vec<super::mapping::RawErrorRule>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTools {
    #[schemars(with = "Option<String>")]
    pub source: Option<Spanned<String>>,
    pub include: Option<Vec<String>>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default, rename = "static")]
    pub static_tools: Vec<RawStaticTool>,
    #[serde(default)]
    pub overrides: BTreeMap<String, RawToolOverride>,
    pub create_run: Option<RawCreateTemplate>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawToolOverride {
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<serde_json::Value>,
    #[schemars(with = "Option<String>")]
    pub task: Option<Spanned<String>>,
    pub create_run: Option<RawCreateTemplate>,
    /// `interruptId` (default) or `interruptKey`: what names the tool's MRTR input requests.
    #[schemars(with = "Option<String>")]
    pub input_request_key: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawStaticTool {
    pub name: String,
    pub workflow_id: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<serde_json::Value>,
    #[schemars(with = "Option<String>")]
    pub task: Option<Spanned<String>>,
    #[serde(default)]
    pub can_suspend: bool,
}

#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCreateTemplate {
    #[serde(default)]
    pub tags: Vec<String>,
    pub metadata: Option<serde_json::Value>,
}

/// One optional override per operation; an unknown operation name is a parse error with a location.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRoutes {
    pub discovery: Option<RawRoute>,
    pub get_workflow: Option<RawRoute>,
    pub list_tools: Option<RawRoute>,
    pub create_run: Option<RawRoute>,
    pub get_run: Option<RawRoute>,
    pub list_runs: Option<RawRoute>,
    pub cancel_run: Option<RawRoute>,
    pub resolve_interrupt: Option<RawRoute>,
    pub poll_events: Option<RawRoute>,
    pub stream_events: Option<RawRoute>,
}

impl RawRoutes {
    fn take(&mut self, op: Operation) -> Option<RawRoute> {
        match op {
            Operation::Discovery => self.discovery.take(),
            Operation::GetWorkflow => self.get_workflow.take(),
            Operation::ListTools => self.list_tools.take(),
            Operation::CreateRun => self.create_run.take(),
            Operation::GetRun => self.get_run.take(),
            Operation::ListRuns => self.list_runs.take(),
            Operation::CancelRun => self.cancel_run.take(),
            Operation::ResolveInterrupt => self.resolve_interrupt.take(),
            Operation::PollEvents => self.poll_events.take(),
            Operation::StreamEvents => self.stream_events.take(),
        }
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRoute {
    #[schemars(with = "Option<String>")]
    pub method: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub path: Option<Spanned<String>>,
    pub timeout_ms: Option<u64>,
    pub retry: Option<bool>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLogging {
    pub level: Option<String>,
    #[schemars(with = "Option<String>")]
    pub format: Option<Spanned<String>>,
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

fn loc<T>(s: &Spanned<T>) -> Option<(u64, u64)> {
    Some((s.referenced.line(), s.referenced.column()))
}

fn ms(v: Option<u64>, default: u64) -> Duration {
    Duration::from_millis(v.unwrap_or(default))
}

impl RawConfig {
    pub fn normalise(self, src: &str, ov: &Overrides) -> Result<Config, ConfigError> {
        let err = |l: Option<(u64, u64)>, m: String| ConfigError::at(src, l, m);

        let listen: SocketAddr = match (&ov.listen, &self.listen) {
            (Some(a), _) => *a,
            (None, Some(s)) => s.value.parse().map_err(|_| {
                err(
                    loc(s),
                    format!("listen: '{}' is not an address like 0.0.0.0:8080", s.value),
                )
            })?,
            (None, None) => "127.0.0.1:8080".parse().expect("literal address"),
        };

        let url = match (&ov.upstream, &self.upstream.url) {
            (Some(u), _) => check_url(u).map_err(|m| err(None, format!("--upstream: {m}")))?,
            (None, Some(s)) => {
                check_url(&s.value).map_err(|m| err(loc(s), format!("upstream.url: {m}")))?
            }
            (None, None) => "http://127.0.0.1:8787".to_string(),
        };
        // Files are checked for existence here; their contents when the listener or client is built.
        let file = |s: &Spanned<String>, what: &str| -> Result<std::path::PathBuf, ConfigError> {
            let p = std::path::PathBuf::from(&s.value);
            if p.is_file() {
                Ok(p)
            } else {
                Err(err(
                    loc(s),
                    format!("{what}: '{}' is not a readable file", s.value),
                ))
            }
        };
        let ca_file = match &self.upstream.ca_file {
            Some(s) => Some(file(s, "upstream.caFile")?),
            None => None,
        };
        let client_cert = match (
            &self.upstream.client_cert_file,
            &self.upstream.client_key_file,
        ) {
            (Some(c), Some(k)) => Some((
                file(c, "upstream.clientCertFile")?,
                file(k, "upstream.clientKeyFile")?,
            )),
            (None, None) => None,
            (Some(s), None) | (None, Some(s)) => {
                return Err(err(
                    loc(s),
                    "upstream.clientCertFile and upstream.clientKeyFile go together".into(),
                ))
            }
        };
        let tls = match &self.tls {
            Some(t) => Some((
                file(&t.cert_file, "tls.certFile")?,
                file(&t.key_file, "tls.keyFile")?,
            )),
            None => None,
        };
        let upstream = Upstream {
            url,
            ca_file,
            client_cert,
            connect_timeout: ms(self.upstream.connect_timeout_ms, 2_000),
            request_timeout: ms(self.upstream.request_timeout_ms, 10_000),
            ready_timeout: ms(self.upstream.ready_timeout_ms, 2_000),
            http2: self.upstream.http2.unwrap_or(false),
            http2_max_streams_per_connection: match &self.upstream.http2_max_streams_per_connection
            {
                Some(s) if s.value < 1 => {
                    return Err(err(
                        loc(s),
                        "upstream.http2MaxStreamsPerConnection must be at least 1".into(),
                    ))
                }
                Some(s) => usize::try_from(s.value).unwrap_or(usize::MAX),
                None => 100,
            },
        };

        let path = match &self.mount.path {
            Some(s) => {
                let p = s.value.trim_end_matches('/').to_string();
                if !p.starts_with('/') || p.len() < 2 || p.contains(['?', '#', ' ']) {
                    return Err(err(
                        loc(s),
                        format!(
                            "mount.path: '{}' must be an absolute path like /mcp",
                            s.value
                        ),
                    ));
                }
                p
            }
            None => "/mcp".to_string(),
        };
        let public_url = match &self.mount.public_url {
            Some(s) => Some(
                check_url(&s.value).map_err(|m| err(loc(s), format!("mount.publicUrl: {m}")))?,
            ),
            None => None,
        };
        let mount = Mount {
            path,
            public_url,
            allowed_hosts: self
                .mount
                .allowed_hosts
                .unwrap_or_else(|| vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]),
            enforce_host: self.mount.enforce_host.unwrap_or(false),
            allowed_origins: self.mount.allowed_origins.unwrap_or_default(),
            dead_peer_timeout: match &self.mount.dead_peer_timeout_ms {
                Some(s) if s.value < 1_000 => {
                    return Err(err(
                        loc(s),
                        "mount.deadPeerTimeoutMs must be at least 1000".into(),
                    ))
                }
                Some(s) => Duration::from_millis(s.value),
                None => Duration::from_secs(20),
            },
        };

        let revisions = match &self.mcp.revisions {
            Some(s) => {
                if s.value.is_empty() || s.value.iter().any(|r| r != "2026-07-28") {
                    return Err(err(
                        loc(s),
                        "mcp.revisions: this build serves exactly [\"2026-07-28\"]".into(),
                    ));
                }
                s.value.clone()
            }
            None => vec!["2026-07-28".to_string()],
        };
        let refreshed_at = match &self.mcp.refreshed_at {
            Some(s) => {
                let ok = time::Date::parse(
                    &s.value,
                    &time::macros::format_description!("[year]-[month]-[day]"),
                )
                .is_ok();
                if !ok {
                    return Err(err(
                        loc(s),
                        format!(
                            "mcp.refreshedAt: '{}' is not a date like 2026-09-18",
                            s.value
                        ),
                    ));
                }
                s.value.clone()
            }
            None => "2026-09-18".to_string(),
        };
        let sse_keepalive = match &self.mcp.sse_keepalive_ms {
            Some(s) if s.value == 0 => {
                return Err(err(loc(s), "mcp.sseKeepaliveMs must be at least 1".into()))
            }
            Some(s) => Duration::from_millis(s.value),
            None => Duration::from_millis(5_000),
        };
        let mrtr_max_rounds = match &self.mcp.mrtr_max_rounds {
            Some(s) if !(1..=16).contains(&s.value) => {
                return Err(err(
                    loc(s),
                    "mcp.mrtrMaxRounds must be 1..16 (OpenWOP v2 capabilities.md, getCapabilities facet)".into(),
                ))
            }
            Some(s) => s.value,
            None => 4,
        };
        let request_state_key = match &self.mcp.request_state_key_env {
            Some(var) => match std::env::var(var) {
                Ok(v) if v.len() >= 16 => Some(Secret::new(v.into_bytes())),
                Ok(_) => {
                    return Err(err(
                        None,
                        format!("mcp.requestStateKeyEnv: ${var} must hold at least 16 bytes"),
                    ))
                }
                Err(_) => {
                    return Err(err(
                        None,
                        format!("mcp.requestStateKeyEnv: ${var} is not set"),
                    ))
                }
            },
            None => std::env::var("OPENWOP_SIDECAR_STATE_KEY")
                .ok()
                .filter(|v| v.len() >= 16)
                .map(|v| Secret::new(v.into_bytes())),
        };
        let mcp = Mcp {
            revisions,
            refreshed_at,
            server_name: self
                .mcp
                .server_name
                .unwrap_or_else(|| "openwop-mcp-sidecar".into()),
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            discover_ttl: ms(self.mcp.discover_ttl_ms, 60_000),
            tools_list_ttl: ms(self.mcp.tools_list_ttl_ms, 30_000),
            json_answer_cap: ms(self.mcp.json_answer_cap_ms, 5_000),
            sse_answer_cap: ms(self.mcp.sse_answer_cap_ms, 600_000),
            task_immediate_window: ms(self.mcp.task_immediate_window_ms, 300),
            sse_keepalive,
            mrtr_max_rounds,
            request_state_ttl: Duration::from_secs(
                self.mcp.request_state_ttl_seconds.unwrap_or(600),
            ),
            request_state_key,
        };

        let tasks = Tasks {
            enabled: self.tasks.enabled.unwrap_or(true),
            poll_interval_ms: match &self.tasks.poll_interval_ms {
                Some(s) if s.value == 0 => {
                    return Err(err(
                        loc(s),
                        "tasks.pollIntervalMs must be a positive integer (ext-tasks §TTL)".into(),
                    ))
                }
                Some(s) => s.value,
                None => 500,
            },
            max_listen_task_ids: self.tasks.max_listen_task_ids.unwrap_or(100),
            listen_poll_interval: ms(self.tasks.listen_poll_interval_ms, 500),
        };

        let mut by_op = BTreeMap::new();
        let mut raw_routes = self.host.routes;
        for op in Operation::ALL {
            let (dm, dp, dr) = op.v2_default();
            let raw = raw_routes.take(op).unwrap_or_default();
            let method = match &raw.method {
                Some(s) => http::Method::from_bytes(s.value.to_ascii_uppercase().as_bytes())
                    .map_err(|_| {
                        err(
                            loc(s),
                            format!(
                                "host.routes.{}.method: '{}' is not an HTTP method",
                                op.key(),
                                s.value
                            ),
                        )
                    })?,
                None => http::Method::from_bytes(dm.as_bytes()).expect("literal method"),
            };
            let (template, tloc) = match &raw.path {
                Some(s) => (s.value.clone(), loc(s)),
                None => (dp.to_string(), None),
            };
            let segments = parse_template(op, &template)
                .map_err(|m| err(tloc, format!("host.routes.{}.path: {m}", op.key())))?;
            let mut headers = Vec::new();
            for (k, v) in &raw.headers {
                let name = http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                    err(
                        None,
                        format!(
                            "host.routes.{}.headers: '{k}' is not a header name",
                            op.key()
                        ),
                    )
                })?;
                let value = http::HeaderValue::from_str(v).map_err(|_| {
                    err(
                        None,
                        format!(
                            "host.routes.{}.headers.{k}: not a valid header value",
                            op.key()
                        ),
                    )
                })?;
                headers.push((name, value));
            }
            by_op.insert(
                op,
                Route {
                    method,
                    template,
                    segments,
                    timeout: ms(raw.timeout_ms, upstream.request_timeout.as_millis() as u64),
                    retry: raw.retry.unwrap_or(dr),
                    headers,
                },
            );
        }

        let mapping = super::mapping::RawMapping {
            ids: self.host.ids,
            fields: self.host.fields,
            statuses: self.host.statuses,
            bodies: self.host.bodies,
            errors: self.host.errors,
        }
        .normalise()
        .map_err(|(l, m)| err(l, m))?;

        let task_support =
            |t: &Option<Spanned<String>>, what: &str| -> Result<TaskSupport, ConfigError> {
                match t {
                    None => Ok(TaskSupport::May),
                    Some(s) => match s.value.as_str() {
                        "must" => Ok(TaskSupport::Must),
                        "may" => Ok(TaskSupport::May),
                        "never" => Ok(TaskSupport::Never),
                        other => Err(err(
                            loc(s),
                            format!("{what}.task: '{other}' is not one of must, may, never"),
                        )),
                    },
                }
            };
        let template = |t: &Option<RawCreateTemplate>,
                        what: &str|
         -> Result<Option<CreateTemplate>, ConfigError> {
            match t {
                None => Ok(None),
                Some(t) => {
                    if t.metadata.as_ref().is_some_and(|m| !m.is_object()) {
                        return Err(err(
                            None,
                            format!("{what}.createRun.metadata must be a mapping"),
                        ));
                    }
                    Ok(Some(CreateTemplate {
                        tags: t.tags.clone(),
                        metadata: t.metadata.clone(),
                    }))
                }
            }
        };
        let schema_ok = |s: &Option<serde_json::Value>, what: &str| -> Result<(), ConfigError> {
            match s {
                Some(v) if v.get("type").and_then(|t| t.as_str()) != Some("object") => Err(err(
                    None,
                    format!("{what}.inputSchema must be a JSON Schema object with type: object"),
                )),
                _ => Ok(()),
            }
        };
        let mut overrides = std::collections::HashMap::new();
        for (name, o) in &self.tools.overrides {
            let what = format!("tools.overrides.{name}");
            schema_ok(&o.input_schema, &what)?;
            overrides.insert(
                name.clone(),
                ToolOverride {
                    title: o.title.clone(),
                    description: o.description.clone(),
                    input_schema: o.input_schema.clone(),
                    task: match &o.task {
                        None => None,
                        t => Some(task_support(t, &what)?),
                    },
                    create_run: template(&o.create_run, &what)?,
                    input_request_key: match &o.input_request_key {
                        None => None,
                        Some(s) => Some(match s.value.as_str() {
                            "interruptId" => InputRequestKey::InterruptId,
                            "interruptKey" => InputRequestKey::InterruptKey,
                            other => return Err(err(
                                loc(s),
                                format!("{what}.inputRequestKey: '{other}' is not one of interruptId, interruptKey"),
                            )),
                        }),
                    },
                },
            );
        }
        let mut statics = Vec::new();
        for t in &self.tools.static_tools {
            let what = format!("tools.static[{}]", t.name);
            schema_ok(&t.input_schema, &what)?;
            statics.push(StaticTool {
                name: t.name.clone(),
                workflow_id: t.workflow_id.clone().unwrap_or_else(|| t.name.clone()),
                title: t.title.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
                task: task_support(&t.task, &what)?,
                can_suspend: t.can_suspend,
            });
        }
        let source = match &self.tools.source {
            Some(s) => match s.value.as_str() {
                "auto" => ToolSource::Auto,
                "fixtures" => ToolSource::Fixtures,
                "toolCatalog" => ToolSource::ToolCatalog,
                "static" => ToolSource::Static,
                other => {
                    return Err(err(
                        loc(s),
                        format!(
                        "tools.source: '{other}' is not one of auto, fixtures, toolCatalog, static"
                    ),
                    ))
                }
            },
            None => ToolSource::Auto,
        };
        if source == ToolSource::Static && statics.is_empty() {
            return Err(err(
                self.tools.source.as_ref().and_then(loc),
                "tools.source is static but tools.static lists no tool".into(),
            ));
        }
        let tools = Tools {
            source,
            include: self.tools.include.unwrap_or_else(|| vec!["*".into()]),
            exclude: self.tools.exclude,
            statics,
            overrides,
            create_run: template(&self.tools.create_run, "tools")?.unwrap_or_default(),
        };

        let logging = Logging {
            level: self.logging.level.unwrap_or_else(|| "info".into()),
            json: match &self.logging.format {
                Some(s) => match s.value.as_str() {
                    "json" => true,
                    "text" => false,
                    other => {
                        return Err(err(
                            loc(s),
                            format!("logging.format: '{other}' is not one of json, text"),
                        ))
                    }
                },
                None => false,
            },
        };

        let otlp = match &self.telemetry.otlp {
            None => None,
            Some(o) => {
                let endpoint = check_url(&o.endpoint.value)
                    .map_err(|m| err(loc(&o.endpoint), format!("telemetry.otlp.endpoint: {m}")))?;
                let mut headers = Vec::new();
                if let Some(h) = &o.headers {
                    for (k, v) in &h.value {
                        if http::HeaderName::from_bytes(k.as_bytes()).is_err() {
                            return Err(err(
                                loc(h),
                                format!("telemetry.otlp.headers: '{k}' is not a header name"),
                            ));
                        }
                        // The value may be a credential: name the header, never print it.
                        if http::HeaderValue::from_str(v).is_err() {
                            return Err(err(
                                loc(h),
                                format!("telemetry.otlp.headers: the value of '{k}' is not a valid header value"),
                            ));
                        }
                        headers.push((k.clone(), Secret::new(v.clone())));
                    }
                }
                let sample_ratio = match &o.sample_ratio {
                    Some(s) if !(0.0..=1.0).contains(&s.value) => {
                        return Err(err(
                            loc(s),
                            "telemetry.otlp.sampleRatio must be between 0.0 and 1.0".into(),
                        ))
                    }
                    Some(s) => s.value,
                    None => 1.0,
                };
                let timeout = match &o.timeout_ms {
                    Some(s) if s.value < 100 => {
                        return Err(err(
                            loc(s),
                            "telemetry.otlp.timeoutMs must be at least 100".into(),
                        ))
                    }
                    Some(s) => Duration::from_millis(s.value),
                    None => Duration::from_millis(10_000),
                };
                let ca_file = match &o.ca_file {
                    Some(s) => Some(file(s, "telemetry.otlp.caFile")?),
                    None => None,
                };
                Some(Otlp {
                    endpoint,
                    headers,
                    service_name: o
                        .service_name
                        .clone()
                        .unwrap_or_else(|| "openwop-mcp-sidecar".into()),
                    sample_ratio,
                    timeout,
                    ca_file,
                })
            }
        };

        let reload_poll = match &self.reload.poll_interval_ms {
            Some(s) if s.value < 100 => {
                return Err(err(
                    loc(s),
                    "reload.pollIntervalMs must be at least 100".into(),
                ))
            }
            Some(s) => Duration::from_millis(s.value),
            None => Duration::from_millis(2_000),
        };
        let at_least = |v: &Option<Spanned<u64>>,
                        min: u64,
                        default: u64,
                        what: &str|
         -> Result<u64, ConfigError> {
            match v {
                Some(s) if s.value < min => {
                    Err(err(loc(s), format!("limits.{what} must be at least {min}")))
                }
                Some(s) => Ok(s.value),
                None => Ok(default),
            }
        };
        let l = &self.limits;
        let limits = Limits {
            max_body_bytes: at_least(&l.max_body_bytes, 1024, 4 << 20, "maxBodyBytes")? as usize,
            max_json_depth: at_least(&l.max_json_depth, 8, 64, "maxJsonDepth")? as usize,
            max_concurrent_requests: at_least(
                &l.max_concurrent_requests,
                1,
                8192,
                "maxConcurrentRequests",
            )? as usize,
            max_streams: at_least(&l.max_streams, 1, 20_000, "maxStreams")? as usize,
            header_read_timeout: Duration::from_millis(at_least(
                &l.header_read_timeout_ms,
                100,
                10_000,
                "headerReadTimeoutMs",
            )?),
            body_read_timeout: Duration::from_millis(at_least(
                &l.body_read_timeout_ms,
                100,
                30_000,
                "bodyReadTimeoutMs",
            )?),
            max_upstream_event_bytes: at_least(
                &l.max_upstream_event_bytes,
                1024,
                1 << 20,
                "maxUpstreamEventBytes",
            )? as usize,
        };
        let auth = super::auth::normalise(self.auth, src)?;
        Ok(Config {
            listen,
            limits,
            tls,
            reload_poll,
            upstream,
            mount,
            mcp,
            tasks,
            ownership: Ownership {
                cancel_deadline: ms(self.ownership.cancel_deadline_ms, 30_000),
                cancel_reason: "mcp-request-cancelled".into(),
            },
            shutdown: Shutdown {
                drain_timeout: ms(self.shutdown.drain_timeout_ms, 30_000),
                lame_duck: ms(self.shutdown.lame_duck_ms, 12_000),
            },
            routes: Arc::new(Routes { by_op }),
            mapping: Arc::new(mapping),
            tools,
            logging,
            telemetry: Telemetry { otlp },
            auth,
        })
    }
}

fn check_url(u: &str) -> Result<String, String> {
    let t = u.trim_end_matches('/');
    let rest = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
        .ok_or_else(|| format!("'{u}' must start with http:// or https://"))?;
    if rest.is_empty() || rest.contains(['?', '#', ' ']) {
        return Err(format!("'{u}' is not a base URL like http://host:8787"));
    }
    t.parse::<http::Uri>()
        .map_err(|_| format!("'{u}' is not a valid URL"))?;
    Ok(t.to_string())
}
