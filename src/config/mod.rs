//! Configuration: one YAML file, parsed with `serde-saphyr` (location-rich errors, no
//! deprecated `serde_yaml`), unknown keys refused, validated into one normalised [`Config`].
//!
//! Everything the sidecar assumes about the host (routes, status names) is data here, with
//! OpenWOP v2 as the default, so that no route string is scattered through the handlers.

pub mod auth;
mod explain;
pub mod mapping;
mod raw;
pub mod routes;
mod secret;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use mapping::{ErrorClass, IdEncoding, Mapping};
pub use raw::RawConfig;
pub use routes::{Operation, Route, Routes};
pub use secret::Secret;

/// A configuration error that names where it happened: `file:line:column: message`, or
/// `file: message` when the error is about the whole file (it cannot be read), `line` 0.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    pub source_name: String,
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl ConfigError {
    fn render(&self) -> String {
        if self.line == 0 {
            format!("{}: {}", self.source_name, self.message)
        } else {
            format!(
                "{}:{}:{}: {}",
                self.source_name, self.line, self.column, self.message
            )
        }
    }

    /// `loc` None: not known yet; [`Config::from_yaml_str`] then looks for the path the message
    /// starts with, and without one the error names the file only (never a made-up 1:1).
    fn at(source_name: &str, loc: Option<(u64, u64)>, message: impl Into<String>) -> Self {
        let (line, column) = loc.unwrap_or((0, 0));
        ConfigError {
            source_name: source_name.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// How the tool catalog is built (OpenWOP v2 openapi.yaml, getWorkflow and listTools; docs/architecture.md, deliberate differences).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSource {
    /// The default: the host's `GET /tools` catalog when its discovery document advertises a
    /// `toolCatalog` family, with the discovery `fixtures[]` workflows filling in what the
    /// catalog lacks; the fixtures alone when it does not.
    Auto,
    /// Discovery `fixtures[]`, then `getWorkflow` for each.
    Fixtures,
    /// `GET /tools` (the host's toolCatalog).
    ToolCatalog,
    /// The `tools.static` list in this file.
    Static,
}

/// Whether a tool runs as a task (ext-tasks §Capability Negotiation: server-directed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Only as a task: a call without the extension gets -32021.
    Must,
    /// A task when the client declares the extension, else a blocking call.
    May,
    /// Always a blocking call, even for a Tasks client.
    Never,
}

/// What names a tool's MRTR input requests (the `inputRequests` keys of a `tools/call` round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputRequestKey {
    /// The open interrupt's `interruptId` (RFC 0208 mcp.mrtr: "Key = the open interrupt's
    /// interruptId"), the default.
    #[default]
    InterruptId,
    /// The interrupt's own `key` (InterruptPayload `key`, a name the workflow chose), bound to
    /// its `interruptId` by the requestState; the `interruptId` whenever an interrupt has no
    /// key or shares it with another open interrupt.
    InterruptKey,
}

/// Extra createRun body content (tags, metadata) for every run or one tool's runs.
#[derive(Debug, Clone, Default)]
pub struct CreateTemplate {
    pub tags: Vec<String>,
    pub metadata: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default)]
pub struct ToolOverride {
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<serde_json::Value>,
    /// None: the workflow's own declaration (or `may`) stays.
    pub task: Option<TaskSupport>,
    pub create_run: Option<CreateTemplate>,
    pub input_request_key: Option<InputRequestKey>,
}

#[derive(Debug, Clone)]
pub struct StaticTool {
    pub name: String,
    pub workflow_id: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<serde_json::Value>,
    pub task: TaskSupport,
    pub can_suspend: bool,
}

/// The normalised configuration every part of the sidecar reads.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub limits: Limits,
    /// Serve TLS on the listener with this certificate and key (PEM), reloaded on change.
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// How often the configuration file is checked for changes (hot reload).
    pub reload_poll: Duration,
    pub upstream: Upstream,
    pub mount: Mount,
    pub mcp: Mcp,
    pub tasks: Tasks,
    pub ownership: Ownership,
    pub shutdown: Shutdown,
    pub routes: Arc<Routes>,
    pub mapping: Arc<Mapping>,
    pub tools: Tools,
    pub logging: Logging,
    /// Read at start only: a reload that changes it is logged and takes effect on restart.
    pub telemetry: Telemetry,
    /// Login discovery for MCP clients (`None` = off; src/config/auth.rs).
    pub auth: Option<auth::Auth>,
}

#[derive(Debug, Clone)]
pub struct Upstream {
    /// Base URL of the host, no trailing slash (`http://127.0.0.1:8787`).
    pub url: String,
    /// Extra CA bundle (PEM) trusted for an `https://` upstream.
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS to the upstream.
    pub client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
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

#[derive(Debug, Clone)]
pub struct Mcp {
    pub revisions: Vec<String>,
    pub refreshed_at: String,
    pub server_name: String,
    pub server_version: String,
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

#[derive(Debug, Clone)]
pub struct Tasks {
    pub enabled: bool,
    pub poll_interval_ms: u64,
    pub max_listen_task_ids: usize,
    pub listen_poll_interval: Duration,
}

#[derive(Debug, Clone)]
pub struct Ownership {
    /// How long the sidecar keeps retrying the cancel of an orphaned run.
    pub cancel_deadline: Duration,
    pub cancel_reason: String,
}

/// Bounds that keep one client, or many, from exhausting the sidecar (issue 10).
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

#[derive(Debug, Clone)]
pub struct Shutdown {
    pub drain_timeout: Duration,
    /// After SIGTERM, how long `/readyz` answers 503 while the listener keeps serving (and
    /// HTTP/1.1 answers carry `Connection: close`) before the drain begins.
    pub lame_duck: Duration,
}

#[derive(Debug, Clone)]
pub struct Tools {
    pub source: ToolSource,
    /// Glob patterns (`*` wildcard) a tool name must match one of.
    pub include: Vec<String>,
    /// Glob patterns that remove a tool.
    pub exclude: Vec<String>,
    pub statics: Vec<StaticTool>,
    pub overrides: std::collections::HashMap<String, ToolOverride>,
    pub create_run: CreateTemplate,
}

impl Tools {
    /// Whether a tool name passes the include/exclude patterns.
    pub fn admits(&self, name: &str) -> bool {
        self.include.iter().any(|p| glob(p, name)) && !self.exclude.iter().any(|p| glob(p, name))
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let mut rest = s;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(p) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            let Some(at) = rest.find(p) else { return false };
            rest = &rest[at + p.len()..];
        }
    }
    true
}

#[derive(Debug, Clone)]
pub struct Logging {
    pub level: String,
    pub json: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Telemetry {
    pub otlp: Option<Otlp>,
}

/// OTLP/HTTP span export (issue 7).
#[derive(Debug, Clone, PartialEq)]
pub struct Otlp {
    /// The full traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// Header values are often collector credentials (issue 7: never in logs).
    pub headers: Vec<(String, Secret<String>)>,
    pub service_name: String,
    pub sample_ratio: f64,
    pub timeout: Duration,
    pub ca_file: Option<std::path::PathBuf>,
}

/// Command-line overrides (flags win over the file).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub upstream: Option<String>,
}

impl Config {
    /// The built-in defaults (OpenWOP v2), as if an empty file had been given.
    pub fn defaults() -> Config {
        Self::from_yaml_str("{}", "<defaults>", &Overrides::default()).expect("defaults are valid")
    }

    /// Reads, parses and validates a file. Errors name the file, line and column.
    pub fn load(path: &Path, overrides: &Overrides) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            source_name: name.clone(),
            line: 0,
            column: 0,
            message: format!("cannot read the file: {e}"),
        })?;
        Self::from_yaml_str(&text, &name, overrides)
    }

    pub fn from_yaml_str(
        text: &str,
        source_name: &str,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        // An empty document means "all defaults", like `{}`.
        let text = if text.trim().is_empty() { "{}" } else { text };
        let raw: RawConfig = serde_saphyr::from_str(text).map_err(|e| {
            let loc = e.location().map(|l| (l.line(), l.column()));
            let message = clean_message(&e.to_string());
            let message = loc
                .and_then(|l| explain::type_error(text, &message, l))
                .unwrap_or(message);
            let loc = locate_unknown_field(text, &message, loc).or(loc);
            ConfigError::at(source_name, loc, message)
        })?;
        raw.normalise(source_name, overrides).map_err(|mut e| {
            // Checks made after deserialisation without a span (host.fields, host.bodies,
            // route headers, …) still point at the value their message names.
            if e.line == 0 {
                let found = explain::leading_path(&e.message)
                    .and_then(|p| explain::locate_path(&explain::tree(text)?, p));
                if let Some((line, column)) = found {
                    (e.line, e.column) = (line, column);
                }
            }
            e
        })
    }
}

/// The JSON Schema of the configuration file, generated from the types the file is parsed
/// into (so it cannot drift from what `check-config` accepts). Shipped as
/// `config/sidecar.schema.json` for editors; `openwop-mcp-sidecar config-schema` prints it.
pub fn json_schema() -> serde_json::Value {
    let mut v = serde_json::to_value(schemars::schema_for!(RawConfig)).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("title".into(), "openwop-mcp-sidecar configuration".into());
        o.insert(
            "description".into(),
            "One YAML file; every field optional, OpenWOP v2 defaults (see config/sidecar.example.yaml).".into(),
        );
    }
    v
}

/// serde-saphyr renders "error: line L column C: <message> at line L, column C" and a
/// snippet; keep only the message, since the location is reported separately.
fn clean_message(s: &str) -> String {
    let first = s.lines().next().unwrap_or(s).trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let first = match first.strip_prefix("line ") {
        Some(rest) => rest.split_once(": ").map(|(_, m)| m).unwrap_or(first),
        None => first,
    };
    match first.rfind(" at line ") {
        Some(i) => first[..i].to_string(),
        None => first.to_string(),
    }
}

/// serde-saphyr places an unknown-field error at the start of its mapping; point at the
/// offending key instead, searching from that mapping down.
fn locate_unknown_field(text: &str, message: &str, from: Option<(u64, u64)>) -> Option<(u64, u64)> {
    let field = message.strip_prefix("unknown field `")?.split('`').next()?;
    let start = from.map(|(l, _)| l as usize).unwrap_or(1).max(1);
    for (i, line) in text.lines().enumerate().skip(start - 1) {
        let trimmed = line.trim_start();
        let key = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        let key = key.trim_start_matches(['"', '\'']);
        if key.starts_with(field)
            && key[field.len()..]
                .trim_start_matches(['"', '\''])
                .trim_start()
                .starts_with(':')
        {
            let col = line.len() - key.len() + 1;
            return Some(((i + 1) as u64, col as u64));
        }
    }
    None
}

#[cfg(test)]
mod tests;
